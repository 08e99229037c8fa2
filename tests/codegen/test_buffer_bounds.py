"""`xlapy.compile` verifies its module and never lets a kernel touch memory outside its buffers, even with
`verify=False`; what it cannot run is refused up front, naming every op at once."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.errors import UnimplementedError, VerifyError, XlapyError
from xlapy.hlo import parse_module
from xlapy.runtime import executable

# The fusion's second output is declared f32[4], but its fused root computes 4,000,000 elements.
TUPLE_OVERFLOW = """HloModule m
f { a = f32[4000000] parameter(0)  n = f32[4000000] negate(a)  ROOT t = (f32[4000000], f32[4000000]) tuple(a, n) }
ENTRY e { p = f32[4000000] parameter(0)  ROOT fusion = (f32[4000000], f32[4]) fusion(p), kind=kLoop, calls=f }
"""
# A slice reading 1024 elements of an f32[8].
SLICE_OVERREAD = """HloModule m
f { a = f32[8] parameter(0)  ROOT s = f32[1024] slice(a), slice={[0:1024]} }
ENTRY e { p = f32[8] parameter(0)  ROOT fusion = f32[1024] fusion(p), kind=kLoop, calls=f }
"""
# The fused parameter claims more elements than the operand the fusion gets.
PARAMETER_OVERREAD = """HloModule m
f { a = f32[1024] parameter(0)  ROOT n = f32[1024] negate(a) }
ENTRY e { p = f32[8] parameter(0)  ROOT fusion = f32[1024] fusion(p), kind=kLoop, calls=f }
"""


def _run_isolated(text: str, verify: bool) -> subprocess.CompletedProcess:
    """Compiles and runs ``text`` in a child process (a memory error there cannot take pytest down) and prints
    the class of the exception it raised, or ``ran``."""
    script = textwrap.dedent(f"""
        import numpy as np, xlapy
        from xlapy.errors import XlapyError
        module = xlapy.parse_hlo({text!r})
        try:
            run = xlapy.compile(module, verify={verify})
            run(*[np.ones(p.shape.dimensions, np.float32) for p in module.entry.parameters])
            print("ran")
        except XlapyError as error:
            print(type(error).__name__)
    """)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)


# Each fusion without the verifier (the backend's own checks refuse it) in the default run; with the verifier in
# front, one of them there and the others with the slow tests (a process each).
@pytest.mark.parametrize(("text", "verify"), [
    pytest.param(text, verify, id=f"{verify}-{name}", marks=[pytest.mark.slow] if verify and name != "tuple-output"
                 else []) for verify in (True, False)
    for text, name in ((TUPLE_OVERFLOW, "tuple-output"), (SLICE_OVERREAD, "slice"), (PARAMETER_OVERREAD, "parameter"))])
def test_inconsistent_fusions_are_refused_without_touching_memory(text, verify):
    result = _run_isolated(text, verify)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "VerifyError"


def test_compile_verifies_the_module_by_default():
    module = parse_module(SLICE_OVERREAD)
    with pytest.raises(VerifyError, match=r"slice \[0:1024\]"):
        xlapy.compile(module)
    # Without the verifier, the code generator's own checks name the fusion and the instruction.
    with pytest.raises(VerifyError, match=r"fusion fusion: .*\bs\b"):
        xlapy.compile(module, verify=False)


def test_tuple_output_of_the_wrong_size_names_the_output():
    with pytest.raises(VerifyError, match=r"fusion fusion: output 1 is f32\[4\]"):
        xlapy.compile(parse_module(TUPLE_OVERFLOW), verify=False)


def test_loop_fusion_outputs_of_different_dimensions_are_refused():
    # The loop emitter walks the first output's indices and writes every output at them: an f32[4] second output
    # would be written at 8 indices.
    module = parse_module("""HloModule m
f { a = f32[8] parameter(0)  n = f32[8] negate(a)  s = f32[4] slice(n), slice={[0:4]}
    ROOT t = (f32[8], f32[4]) tuple(n, s) }
ENTRY e { p = f32[8] parameter(0)  ROOT fusion = (f32[8], f32[4]) fusion(p), kind=kLoop, calls=f }
""")
    with pytest.raises(VerifyError, match=r"fusion fusion: outputs f32\[8\] and f32\[4\] have different"):
        xlapy.compile(module, verify=False)


def test_a_kernel_refuses_buffers_of_other_sizes():
    module = parse_module("""HloModule m
f { a = f32[16] parameter(0)  ROOT n = f32[16] negate(a) }
ENTRY e { p = f32[16] parameter(0)  ROOT fusion = f32[16] fusion(p), kind=kLoop, calls=f }
""")
    run = xlapy.compile(module)
    (kernel,) = run.kernels.values()
    assert kernel.signature.buffer_sizes == (64, 64)
    out = np.empty(16, np.float32)
    with pytest.raises(VerifyError, match="buffer 0 has 32 bytes"):
        kernel([np.ones(8, np.float32), out])
    with pytest.raises(VerifyError, match="block range"):
        kernel([np.ones(16, np.float32), out], 0, kernel.signature.blocks + 1)
    kernel([np.arange(16, dtype=np.float32), out])
    np.testing.assert_array_equal(out, -np.arange(16, dtype=np.float32))


def test_every_blocking_op_is_named_at_once():
    module = parse_module("""HloModule m
f { a = f32[2,2] parameter(0)  ROOT c = f32[2,2] cosine(a) }
g { a = f32[2,2] parameter(0)  z = f32[] constant(0)
    ROOT r = f32[2] reduce(a, z), dimensions={1}, to_apply=add }
add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }
ENTRY e {
  a = f32[2,2] parameter(0)
  d = f32[2,2] custom-call(a), custom_call_target="bar"
  cc = f32[2,2] custom-call(d), custom_call_target="foo"
  l = f32[2,2] fusion(cc), kind=kLoop, calls=f
  rf = f32[2] fusion(l), kind=kInput, calls=g
  ROOT t = (f32[2,2], f32[2]) tuple(l, rf)
}""")
    with pytest.raises(UnimplementedError) as caught:
        xlapy.compile(module, run_hlo_passes=False)
    message = str(caught.value)
    assert re.search(r"the CPU backend cannot run m: custom-call d\b.*'bar'.*, custom-call cc\b.*'foo'.*, "
                     r"fusion \(rf\) of kind kInput", message), message
    assert message.endswith("run it with the interpreter (--backend interpreter)")


def test_unsupported_fused_ops_are_named_before_compiling():
    module = parse_module("""HloModule m
f { a = f32[2,2] parameter(0)  r = f32[2,2] cholesky(a), lower=true
    ROOT c = f32[2,2] negate(r) }
ENTRY e { p = f32[2,2] parameter(0)  w = f32[2,2] copy(p)
          ROOT fusion = f32[2,2] fusion(w), kind=kLoop, calls=f }
""")
    with pytest.raises(UnimplementedError, match=r"cannot run m: cholesky \(r\) in fusion fusion;"):
        xlapy.compile(module, run_hlo_passes=False)


def test_tuple_parameter_takes_a_tuple_of_arrays():
    module = parse_module("""HloModule m
ENTRY e { p = (f32[2], f32[2]) parameter(0)  ROOT g = f32[2] get-tuple-element(p), index=1 }
""")
    run = xlapy.compile(module)
    np.testing.assert_array_equal(run((np.ones(2, np.float32), np.array([3, 4], np.float32))), [3, 4])
    with pytest.raises(XlapyError, match="argument for parameter p must be a tuple of 2 values"):
        run(np.ones(2, np.float32))


def test_outputs_too_large_for_memory_are_a_clear_error(monkeypatch):
    monkeypatch.setenv("XLAPY_MAX_BYTES", str(1 << 20))
    module = parse_module("""HloModule m
f { a = f32[] parameter(0)  ROOT b = f32[1048576] broadcast(a), dimensions={} }
ENTRY e { p = f32[] parameter(0)  ROOT fusion = f32[1048576] fusion(p), kind=kLoop, calls=f }
""")
    run = xlapy.compile(module)
    with pytest.raises(XlapyError, match=r"output of fusion .* needs 4 MiB"):
        run(np.float32(1))


def test_a_failing_allocation_is_a_clear_error(monkeypatch):
    def no_memory(*args, **kwargs):
        raise MemoryError

    module = parse_module("""HloModule m
f { a = f32[4] parameter(0)  ROOT n = f32[4] negate(a) }
ENTRY e { p = f32[4] parameter(0)  ROOT fusion = f32[4] fusion(p), kind=kLoop, calls=f }
""")
    run = xlapy.compile(module)
    monkeypatch.setattr(executable.np, "empty", no_memory)
    with pytest.raises(XlapyError, match=r"cannot allocate the buffer of parameter 0 \(16 bytes\): out of memory"):
        run(np.ones(4, np.float32))


@pytest.mark.parametrize("dead", ["d = f32[8] exponential(n)", "d = f32[8] exponential(n)  e2 = f32[8] sine(d)"])
def test_multi_output_fusion_with_a_dead_user(dead):
    text = f"""HloModule m
f {{ a = f32[8] parameter(0)  n = f32[8] negate(a)  {dead}  e = f32[8] sine(n)
    ROOT t = (f32[8], f32[8]) tuple(n, e) }}
ENTRY e {{ p = f32[8] parameter(0)  ROOT fusion = (f32[8], f32[8]) fusion(p), kind=kLoop, calls=f }}
"""
    module = parse_module(text)
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    got = xlapy.compile(module)(x)
    # measured: bit for bit, and sine correctly rounded (6 draws of x)
    assert_same(got, xlapy.evaluate(module, x))
    assert_same(got[1], np.sin(-x.astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize("body, message", [
    ("p = f32[8] parameter(0)  ROOT b = f32[1024] bitcast(p)", "bitcast must keep the byte size"),
    ("p = f32[8] parameter(0)  t = (f32[8]) tuple(p)  ROOT g = f32[8] get-tuple-element(t), index=3",
     "index=3 of get-tuple-element is out of range"),
])
def test_unverified_entry_ops_are_checked(body, message):
    module = parse_module("HloModule m\nENTRY e { " + body + " }")
    with pytest.raises(VerifyError, match=message):
        xlapy.compile(module, verify=False)


# Three f32 in a buffer tiled by 4: 16 bytes, one of them padding.
PADDED_BITCAST = "HloModule m\nENTRY e {{ p = f32[3]{{0:T(4)}} parameter(0)  ROOT b = {result} bitcast(p) }}"


@pytest.mark.parametrize("verify", [True, False])
def test_a_bitcast_that_drops_tile_padding_is_refused(verify):
    module = parse_module(PADDED_BITCAST.format(result="f32[3]{0}"))
    with pytest.raises(VerifyError, match=r"bitcast must keep the byte size: f32\[3\]\{0:T\(4\)\} has 16 bytes, "
                                          r"f32\[3\] has 12"):
        xlapy.compile(module, verify=verify)


def test_a_bitcast_keeping_tile_padding_reads_the_padded_buffer():
    module = parse_module(PADDED_BITCAST.format(result="f32[4]{0}"))
    x = np.array([1.5, -2, 7], np.float32)
    # As given: the bitcast is a view of the parameter's padded buffer (the code generator takes no tiles).
    got = xlapy.compile(module, run_hlo_passes=False)(x)
    assert got.shape == (4,)
    np.testing.assert_array_equal(got[:3], x)  # the fourth element is the tile's padding


def test_a_bitcast_of_packed_elements_is_unimplemented_not_a_crash():
    # Two bytes in XLA's packing, but the CPU backend keeps each s4 in a byte of its own.
    module = parse_module("HloModule m\nENTRY e { p = s4[4]{0:E(4)} parameter(0)  ROOT b = s8[2]{0} bitcast(p) }")
    with pytest.raises(UnimplementedError, match="packed elements"):
        xlapy.compile(module)


def test_a_kernel_with_another_buffer_count_is_not_run():
    module = parse_module("""HloModule m
f { a = f32[4] parameter(0)  ROOT n = f32[4] negate(a) }
ENTRY e { p = f32[4] parameter(0)  ROOT fusion = f32[4] fusion(p), kind=kLoop, calls=f }
""")
    run = xlapy.compile(module)
    (step,) = run.thunks
    calls = []

    class OneBufferKernel:  # the fusion's input buffer matches; its output buffer is missing
        signature = types.SimpleNamespace(buffer_sizes=step.kernel.signature.buffer_sizes[:1])

        def __call__(self, *args):
            calls.append(args)

    step.kernel = OneBufferKernel()
    with pytest.raises(VerifyError, match="fusion fusion: 2 buffers, its kernel was compiled for 1"):
        run(np.ones(4, np.float32))
    assert not calls
