"""The ``xlapy`` command."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from xlapy.errors import ParseError, XlapyError
from xlapy.version import __version__


class _UsageError(Exception):
    """A command line argparse rejects; reported as one line like any error."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def _int_at_least(low: int):
    def parse(text: str) -> int:
        from xlapy.syntax import INT64_MAX, INT64_MIN, IntegerError, read_int

        try:
            value = read_int(text, INT64_MIN, INT64_MAX)
        except IntegerError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def _read_text(path: str) -> str:
    """The UTF-8 text of the regular file at ``path``."""
    from xlapy.files import read_regular_file

    data = read_regular_file(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start = data.rfind(b"\n", 0, e.start) + 1
        raise ParseError(f"not UTF-8 text: byte 0x{data[e.start]:02x} at offset {e.start}",
                         data.count(b"\n", 0, e.start) + 1, e.start - line_start + 1, path) from None


def _is_mlir(path: str, text: str) -> bool:
    """StableHLO (MLIR) rather than HLO text: by content, else by extension."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        if line.startswith("HloModule"):
            return False
        if line.startswith(("module", "func.func", "#", "sdy.mesh", '"', "stablehlo.")):
            return True
        break
    return path.endswith(".mlir")


def _layout(args: argparse.Namespace) -> None:
    from xlapy.shapes import parse_shape
    from xlapy.shapes.picture import LayoutPicture

    shape = parse_shape(args.shape)
    if not shape.is_array:
        raise XlapyError(f"{shape} is not an array shape; only arrays have a physical layout")
    picture = LayoutPicture(shape, max_rows=args.max_rows, max_cols=args.max_cols, max_grids=args.max_grids)
    if args.svg:
        try:
            with open(args.svg, "w", encoding="utf-8") as f:
                f.write(picture.to_svg())
        except OSError as e:
            raise XlapyError(f"cannot write {args.svg}: {e.strerror}") from None
    sys.stdout.write(picture.to_text())


def _read_module(path: str, verify: bool):
    """The module of an HLO or StableHLO (MLIR) file, verified unless ``verify`` is False."""
    text = _read_text(path)
    if _is_mlir(path, text):
        from xlapy.frontends.stablehlo import parse_module as parse_mlir

        return parse_mlir(text, source=path, verify=verify)
    from xlapy.hlo import parse_module
    from xlapy.hlo import verify as verify_module

    module = parse_module(text, source=path)
    if verify:
        verify_module(module)
    return module


def _check_memory(module, backend: str) -> None:
    """Refuse a module whose values cannot fit in memory before running it: the
    interpreter materialises every value, the CPU backend those of every computation
    but the fused ones (a kernel computes those element by element)."""
    from xlapy.memory import buffer_bytes, check_bytes
    from xlapy.shapes import ELEMENT_TYPES, UNBOUNDED_SIZE

    computations = module.computations
    if backend != "interpreter":
        fused = {id(i.called_computations[0]) for i in module.instructions if i.opcode == "fusion"
                 and i.called_computations}
        computations = [c for c in computations if id(c) not in fused]

    def size(shape) -> int:
        if shape.tuple_shapes:
            return sum(size(s) for s in shape.tuple_shapes)
        if ELEMENT_TYPES[shape.element_type].dtype is None or UNBOUNDED_SIZE in shape.dimensions:
            return 0  # tokens; an unbounded size is only known when running
        # Physical buffers (padding included) hold at least the logical elements the interpreter keeps.
        return buffer_bytes(shape)

    largest = max((i for c in computations for i in c.instructions), key=lambda i: size(i.shape), default=None)
    if largest is not None:
        check_bytes(size(largest.shape), f"the value {largest.name} ({largest.shape})")


def _leaves(value, prefix: str = ""):
    if isinstance(value, tuple):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{prefix}{{{i}}}")
    else:
        yield prefix, value


def _summary(label: str, array) -> str:
    import zlib

    import numpy as np

    from xlapy.shapes import element_type_of_dtype

    shape = f"{element_type_of_dtype(array.dtype).name}[{','.join(map(str, array.shape))}]"
    flat = np.asarray(array).reshape(-1)
    shown = ", ".join(str(v) for v in flat[:6].tolist()) + (", ..." if flat.size > 6 else "")
    with np.errstate(all="ignore"):  # inf - inf in the sum is a NaN to print, not a warning
        total = float(np.sum(flat.astype(np.complex128 if flat.dtype.kind == "c" else np.float64)).real) \
            if flat.size else 0.0
    crc = zlib.crc32(np.ascontiguousarray(flat).tobytes())
    return f"{label}: {shape} [{shown}] sum={total:.6g} crc32={crc:08x}"


def _run(args: argparse.Namespace) -> None:
    from xlapy.hlo.fake_arguments import make_fake_arguments
    from xlapy.interpreter import evaluate

    if args.dump_pass_re is not None and args.dump_to is None:
        raise XlapyError("--dump-pass-re needs --dump-to DIR")
    if args.backend == "interpreter" and (args.dump_to or args.compare or args.disable_all_hlo_passes
                                          or args.disable_hlo_passes):
        raise XlapyError("--dump-to, --compare, --disable-all-hlo-passes and --disable-hlo-passes need "
                         "--backend cpu (the interpreter runs the module as given)")
    if args.backend != "interpreter" and args.max_while_iterations is not None:
        raise XlapyError("--max-while-iterations needs --backend interpreter")
    if args.output:
        _check_writable(args.output)
    # Verified once, as it is read: not again by compile or on every --bench run.
    module = _read_module(args.file, not args.no_verify)
    _check_memory(module, args.backend)
    if args.inputs:
        from xlapy.runtime.array_files import read_arguments

        inputs = read_arguments(args.inputs, [(p.name, p.shape) for p in module.entry.parameters])
    else:
        inputs = make_fake_arguments(module, args.seed)
    executable = None
    if args.backend == "interpreter":
        run = lambda: evaluate(module, *inputs, verify=False,  # noqa: E731
                               max_while_iterations=args.max_while_iterations)
    else:
        executable = _compile(module, args)
        run = lambda: executable(*inputs)  # noqa: E731
    result = run()
    outputs = list(_leaves(result))
    for label, array in outputs:
        print(_summary(f"{module.entry.root.name}{label}", array))
    if args.compare:
        _compare(module, inputs, outputs)
    if args.bench:
        _bench(run, args.repeat, args.backend)
    if args.output:
        import numpy as np

        from xlapy.runtime.array_files import write_arrays

        write_arrays(args.output, {f"out{i}": np.asarray(a) for i, (_, a) in enumerate(outputs)})
    if executable is not None:
        # Last, once everything succeeded: a failing run's stderr is its one error line.
        print(executable.summary, file=sys.stderr)


def _compile(module, args: argparse.Namespace):
    """``xlapy.compile`` with the options of ``xlapy run``: the HLO passes (all, none, or all but some),
    dumps, and progress on stderr while it runs."""
    from xlapy.hlo.dot_graph import dump_dot
    from xlapy.runtime import compile

    progress = _Progress(sys.stderr)
    try:
        executable = compile(module, backend=args.backend, dump_to=args.dump_to, dump_pass_re=args.dump_pass_re,
                             verify=False, run_hlo_passes=not args.disable_all_hlo_passes,
                             disabled_hlo_passes=args.disable_hlo_passes, progress=progress)
    finally:
        progress.close()
    if args.dump_to is not None:
        dump_dot(executable.module, args.dump_to, "optimized")
    return executable


class _Progress:
    """Reports what a compile is doing, on ``stream``: only when it is a terminal, and only once the
    compile has run for ``DELAY`` seconds (short compiles print nothing), each message overwriting
    the last on one line, which ``close`` clears."""

    DELAY = 1.0

    def __init__(self, stream, clock=None):
        import time

        self.stream = stream
        self.clock = clock or time.monotonic
        self.start = self.clock()
        self.shown = False
        try:
            self.enabled = bool(stream.isatty())
        except (AttributeError, ValueError):
            self.enabled = False

    def __call__(self, message: str) -> None:
        if not self.enabled or self.clock() - self.start < self.DELAY:
            return
        import shutil

        width = max(shutil.get_terminal_size().columns - 1, 20)
        line = f"xlapy: compiling ({self.clock() - self.start:.0f} s): {message}"
        self.stream.write("\r\x1b[K" + line[:width])
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def _pass_names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected pass names separated by commas, got {text!r}")
    return names


def _check_writable(path: str) -> None:
    """Refuse an output path that cannot be written before running anything, so
    that an error never follows printed results."""
    import os

    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise XlapyError(f"cannot write {path}: Is a directory")
    if not os.path.isdir(folder):
        raise XlapyError(f"cannot write {path}: No such directory {folder}")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise XlapyError(f"cannot write {path}: Permission denied")


def _compare(module, inputs, outputs) -> None:
    from xlapy.interpreter import evaluate
    from xlapy.runtime.ulps import NAN_MISMATCH, error_in_epsilons, max_ulp_difference

    expected = list(_leaves(evaluate(module, *inputs, verify=False)))
    for (label, actual), (_, reference) in zip(outputs, expected):
        ulps = max_ulp_difference(actual, reference)
        shown = "NaN mismatch" if ulps == NAN_MISMATCH else f"{ulps} ulp"
        epsilons = error_in_epsilons(actual, reference)
        if ulps != NAN_MISMATCH and 0 < epsilons < math.inf:
            # Sums in another order differ by many ulps where they cancel to near zero: the error against the
            # largest value says whether that is more than rounding.
            shown += f" ({epsilons:.3g} ε of the largest magnitude)"
        print(f"compare {module.entry.root.name}{label} with the interpreter: max error {shown}")


def _bench(run, repeat: int, backend: str) -> None:
    import statistics
    import time

    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    print(f"bench ({backend}): median {statistics.median(times) * 1e3:.3f} ms, "
          f"best {min(times) * 1e3:.3f} ms over {repeat} runs")


def _indexing(args: argparse.Namespace) -> None:
    from xlapy.indexing import input_to_output_indexing, output_to_input_indexing

    module = _read_module(args.file, not args.no_verify)
    if args.instruction is None:
        instr = module.entry.root
    else:
        found = [i for c in module.computations for i in c.instructions if i.name == args.instruction]
        if not found:
            raise XlapyError(f"{args.file}: no instruction named '{args.instruction}'")
        instr = found[0]
    blocks = []
    if args.input_to_output:
        if not 0 <= args.input_to_output_id < len(instr.operands):
            raise XlapyError(f"{instr.name} has {len(instr.operands)} operands, no operand {args.input_to_output_id}")
        for output, maps in enumerate(input_to_output_indexing(instr, args.input_to_output_id)):
            blocks.append(_indexing_block(f"output id = {output}", maps))
    else:
        outputs = len(instr.shape.tuple_shapes) if instr.shape.tuple_shapes else 1
        if not 0 <= args.output_id < outputs:
            raise XlapyError(f"{instr.name} has {outputs} output{'s' if outputs > 1 else ''}, "
                             f"no output {args.output_id}")
        for operand, maps in enumerate(output_to_input_indexing(instr, args.output_id)):
            blocks.append(_indexing_block(f"operand id = {operand} ({instr.operands[operand].name})", maps))
    sys.stdout.write("\n".join(blocks))


def _indexing_block(title: str, maps) -> str:
    texts = sorted("unknown indexing" if m.is_undefined() else str(m) for m in maps)
    return title + "\n" + "".join(f"{t}\n" for t in texts)


def _sdy_propagate(args: argparse.Namespace) -> None:
    from xlapy.frontends.stablehlo import parse_module, print_module, split_input_file
    from xlapy.sharding import propagate

    text = _read_text(args.file)
    chunks = split_input_file(text) if args.split_input_file else [(text, 1)]
    outputs = []
    for chunk, first_line in chunks:
        try:
            module = parse_module(chunk, source=args.file, implicit_manual_replication=not args.strict_manual_axes,
                                  verify=not args.no_verify)
            outputs.append(print_module(propagate(module, args.strategy)))
        except ParseError as e:
            # Report the line in the whole file, not in the chunk.
            raise ParseError(" ".join(e.message.split()), e.line + first_line - 1, e.column, e.source) from None
    # Print only once every chunk succeeded: nothing half-printed.
    sys.stdout.write("// -----\n".join(outputs))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="xlapy", description="An XLA-style tensor compiler in Python.")
    parser.add_argument("--version", action="version", version=f"xlapy {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    layout = commands.add_parser(
        "layout", help="draw the physical layout of a (tiled) shape",
        description="Draw where each element of SHAPE lives in its buffer: the logical array "
        "with each element's offset, tiles outlined, padding marked, then the buffer slot by slot.",
    )
    layout.add_argument("shape", metavar="SHAPE", help='a shape in HLO syntax, e.g. "f32[3,5]{1,0:T(2,2)}"')
    layout.add_argument("--svg", metavar="FILE", help="also write the picture as SVG to FILE")
    layout.add_argument("--max-rows", type=_int_at_least(1), default=32, help="rows shown per grid (default 32)")
    layout.add_argument("--max-cols", type=_int_at_least(1), default=32,
                        help="columns shown per grid (default 32)")
    layout.add_argument("--max-grids", type=_int_at_least(0), default=8,
                        help="2-D slices shown for arrays of rank > 2 (default 8)")
    layout.set_defaults(run=_layout)

    run = commands.add_parser(
        "run", help="run an HLO or StableHLO module",
        description="Verify the module, compile it for the CPU as XLA:CPU does (HLO passes, fusion, buffer "
        "assignment, kernels and library calls), then run it on seeded random inputs (parameters used "
        "as indices are drawn in range) or on the arrays of --inputs, and print each output's shape, first "
        "values and checksums. A one-line summary of the compile goes to stderr at the end, and so does its "
        "progress while it runs when stderr is a terminal and the compile takes more than a second.",
    )
    run.add_argument("file", metavar="FILE", help="HLO text, as XLA and JAX print it, or StableHLO MLIR (a .mlir "
                     "file or text starting with 'module', as jax.jit(f).lower(x).as_text() gives)")
    run.add_argument("--backend", choices=["cpu", "interpreter"], default="cpu",
                     help="compile for the CPU (default) or run the reference interpreter")
    run.add_argument("--inputs", metavar="X.npz", help="arguments: an .npz file of arrays named after the "
                     "parameters or arg0, arg1, ..., or all unnamed (np.savez(path, *arrays)), bound in order")
    run.add_argument("--output", metavar="Y.npz", help="save the outputs as out0, out1, ... in an .npz file")
    run.add_argument("--seed", type=_int_at_least(0), default=0, help="seed of the random inputs (default 0)")
    run.add_argument("--compare", action="store_true",
                     help="also run the interpreter and print each output's max error in ulps (and in "
                     "epsilons of the largest magnitude, which sums in another order keep small)")
    run.add_argument("--bench", action="store_true", help="time repeated runs and print the median")
    run.add_argument("--repeat", type=_int_at_least(1), default=20, metavar="N",
                     help="runs timed by --bench (default 20)")
    run.add_argument("--max-while-iterations", type=_int_at_least(0), metavar="N",
                     help="with --backend interpreter: stop with an error when a while loop runs more than N "
                     "iterations (default: no limit, as in XLA)")
    run.add_argument("--no-verify", action="store_true", help="skip verifying the module (faster; bad input may "
                     "then fail later, with a less precise error)")
    run.add_argument("--dump-to", metavar="DIR", help="write into DIR the HLO after each HLO pass that changed "
                     "the module (NNNN.<pipeline>.after_<pass>.hlo), the MLIR after each codegen pass of each kernel "
                     "(<fusion>.NN.<pass>.mlir) and the optimised module as a Graphviz graph "
                     "(<module>.optimized.dot, each fusion a cluster)")
    run.add_argument("--dump-pass-re", metavar="RE",
                     help="with --dump-to: only the codegen passes whose name matches RE (e.g. fusion-emitter)")
    hlo_passes = run.add_mutually_exclusive_group()
    hlo_passes.add_argument("--disable-all-hlo-passes", action="store_true",
                            help="run no HLO pass: compile the module as given (one XLA has already optimised, "
                            "with its fusions)")
    hlo_passes.add_argument("--disable-hlo-passes", metavar="A,B", type=_pass_names, default=(),
                            help="skip the HLO passes of these names (e.g. algsimp,cse)")
    run.set_defaults(run=_run)

    indexing = commands.add_parser(
        "indexing", help="print the indexing maps of an instruction",
        description="Print the indexing maps of one instruction (default: the entry root; for a fusion, the maps "
        "composed through its computation) in XLA's syntax, one block per operand (or per output with "
        "--input-to-output).",
    )
    indexing.add_argument("file", metavar="FILE", help="HLO text, as XLA and JAX print it, or StableHLO MLIR")
    indexing.add_argument("--instruction", metavar="NAME", help="the instruction (default: the entry root)")
    indexing.add_argument("--input-to-output", action="store_true",
                          help="maps from an operand's indices to the outputs' (default: output to operands)")
    indexing.add_argument("--operand", dest="input_to_output_id", type=_int_at_least(0), default=0, metavar="N",
                          help="with --input-to-output: the operand (default 0)")
    indexing.add_argument("--output-id", dest="output_id", type=_int_at_least(0), default=0, metavar="N",
                          help="the output of a multi-output instruction (default 0)")
    indexing.add_argument("--no-verify", action="store_true", help="skip verifying the module")
    indexing.set_defaults(run=_indexing)

    sdy = commands.add_parser(
        "sdy", help="Shardy: sharding propagation on StableHLO",
        description="Shardy's sharding tools on StableHLO/Shardy MLIR programs.",
    )
    sdy_commands = sdy.add_subparsers(dest="sdy_command", required=True, metavar="COMMAND")
    sdy_propagate = sdy_commands.add_parser(
        "propagate", help="propagate shardings and print the module",
        description="Give every tensor of the module a sharding, from the shardings of some of them, the way "
        "Shardy propagates them, and print the module back.",
    )
    sdy_propagate.add_argument("file", metavar="FILE.mlir", help="a StableHLO module with Shardy shardings")
    sdy_propagate.add_argument("--strategy", choices=["basic", "aggressive", "op-priority", "user-priority",
                                                      "pipeline"], default="pipeline",
                               help="the propagation strategy (default: Shardy's whole pipeline)")
    sdy_propagate.add_argument("--split-input-file", action="store_true",
                               help="propagate each chunk between '// -----' lines on its own")
    manual_axes = sdy_propagate.add_mutually_exclusive_group()
    manual_axes.add_argument("--strict-manual-axes", action="store_true",
                             help="require every in/out sharding of a manual computation to mention every manual "
                             "axis (invariant 2 of manual computations) instead of taking the ones left out as "
                             "replicated")
    manual_axes.add_argument("--implicit-manual-replication", action="store_true",
                             help="take a manual axis that an in/out sharding of a manual computation leaves out "
                             "as replicated, as Shardy and JAX's shard_map do (the default; kept for "
                             "compatibility)")
    sdy_propagate.add_argument("--no-verify", action="store_true", help="skip verifying the module")
    sdy_propagate.set_defaults(run=_sdy_propagate)
    return parser


def _input_name(args: argparse.Namespace) -> str:
    return getattr(args, "file", None) or getattr(args, "shape", None) or "the input"


def _error(message: str) -> int:
    # One line, whatever the message holds.
    print("xlapy: error: " + " ".join(message.split()), file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except _UsageError as e:
        return _error(str(e))
    try:
        args.run(args)
    except XlapyError as e:
        return _error(str(e))
    # Last line of defence against deep or huge input: the limits and checks
    # on the way should have caught it with a precise message.
    except RecursionError:
        return _error(f"{_input_name(args)}: input nested too deeply")
    except MemoryError:
        return _error(f"{_input_name(args)}: out of memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
