"""Running a compiled program's convolutions through the library thunk whatever path the thunk emitter chose for
them (``generated_code_is_faster`` in ``xlapy/runtime/thunks/convolution.py``), with its direct kernel or with its
GEMMs: what the library thunk's tests and ``benchmarks/convolution_paths.py`` compare generated code and the two
library paths with."""

from __future__ import annotations

from typing import Any

from xlapy.runtime.executable import Executable
from xlapy.runtime.thunks.base import ThunkSequence
from xlapy.runtime.thunks.convolution import ConvolutionThunk, convolution_plan
from xlapy.runtime.thunks.kernel import KernelThunk


def with_library_convolutions(executable: Executable, direct: bool = True) -> Executable:
    """``executable`` with each kernel of its entry computation that computes one convolution of the kernel's
    operands (a lone convolution, or a fusion of one) replaced by the library thunk over the same slices: the
    same module, buffers and runtime. Unless ``direct``, every library convolution (those replaced and those the
    thunk emitter made) runs the GEMMs, not the direct kernel. Raises ``ValueError`` when its entry computation
    runs no convolution."""
    instructions = {i.name: i for i in executable.module.entry.instructions}
    thunks, convolutions = [], 0
    for thunk in executable.thunks.thunks:
        if isinstance(thunk, ConvolutionThunk):
            convolutions += 1
            if not direct:
                thunk = ConvolutionThunk(thunk.name, thunk.lhs, thunk.lhs_shape, thunk.rhs, thunk.rhs_shape,
                                         thunk.out, thunk.out_shape, convolution_plan(instructions[thunk.name],
                                                                                      direct=False))
        root = thunk.fusion.fused_computation.root if isinstance(thunk, KernelThunk) else None
        if root is None or root.opcode != "convolution" or any(o.opcode != "parameter" for o in root.operands):
            thunks.append(thunk)
            continue
        (lhs, lhs_shape), (rhs, rhs_shape) = (thunk.operands[o.parameter_number] for o in root.operands)
        ((out, out_shape),) = thunk.outputs
        thunks.append(ConvolutionThunk(thunk.name, lhs, lhs_shape, rhs, rhs_shape, out, out_shape,
                                       convolution_plan(root, direct=direct)))
        convolutions += 1
    if not convolutions:
        raise ValueError(f"{executable.module.name} runs no convolution in its entry computation")
    return Executable(executable.module, executable.assignment, ThunkSequence(thunks),
                      executable.summary.compile_seconds)


def grouped_dilated_convolution(lhs: Any, rhs: Any) -> Any:
    """A convolution with every window feature at once (strides, padding, both dilations, two feature groups,
    NHWC/HWIO in and NCHW out), as jax writes it: what both paths are compared with XLA:CPU on."""
    import jax

    return jax.lax.conv_general_dilated(lhs, rhs, window_strides=(2, 1), padding=((1, 1), (0, 2)),
                                        lhs_dilation=(1, 2), rhs_dilation=(2, 1),
                                        dimension_numbers=("NHWC", "HWIO", "NCHW"), feature_group_count=2)
