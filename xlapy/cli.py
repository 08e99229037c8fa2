"""The ``xlapy`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from xlapy import __version__
from xlapy.errors import XlapyError


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


def _read_module(path: str):
    from xlapy.hlo import parse_module

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise XlapyError(f"cannot read {path}: {e.strerror}") from None
    return parse_module(text, source=path)


def _load_inputs(path: str, module) -> list:
    """Arguments from an .npz file: keyed by parameter name, by ``argN``, or in order."""
    import numpy as np

    try:
        with np.load(path) as data:
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError) as e:
        raise XlapyError(f"cannot read inputs from {path}: {e}") from None
    params = module.entry.parameters
    ordered = list(arrays.values())
    args = []
    for i, param in enumerate(params):
        for key in (param.name, f"arg{i}"):
            if key in arrays:
                args.append(arrays[key])
                break
        else:
            if len(ordered) != len(params):
                raise XlapyError(f"{path} has no array for parameter {i} ({param.name}); "
                                 f"name arrays after the parameters or arg0, arg1, ...")
            args.append(ordered[i])
    return args


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
    total = float(np.sum(flat.astype(np.complex128 if flat.dtype.kind == "c" else np.float64)).real) \
        if flat.size else 0.0
    crc = zlib.crc32(np.ascontiguousarray(flat).tobytes())
    return f"{label}: {shape} [{shown}] sum={total:.6g} crc32={crc:08x}"


def _run(args: argparse.Namespace) -> None:
    import numpy as np

    from xlapy.hlo.fake_arguments import make_fake_arguments
    from xlapy.interpreter import evaluate

    module = _read_module(args.file)
    inputs = _load_inputs(args.inputs, module) if args.inputs else make_fake_arguments(module, args.seed)
    if args.dump_pass_re is not None and args.dump_to is None:
        raise XlapyError("--dump-pass-re needs --dump-to DIR")
    if args.backend == "interpreter":
        if args.dump_to or args.compare:
            raise XlapyError("--dump-to and --compare need --backend cpu")
        run = lambda: evaluate(module, *inputs)  # noqa: E731
    else:
        from xlapy.runtime import compile

        executable = compile(module, backend=args.backend, dump_to=args.dump_to, dump_pass_re=args.dump_pass_re)
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
        try:
            np.savez(args.output, **{f"out{i}": np.asarray(a) for i, (_, a) in enumerate(outputs)})
        except OSError as e:
            raise XlapyError(f"cannot write {args.output}: {e.strerror}") from None


def _compare(module, inputs, outputs) -> None:
    from xlapy.interpreter import evaluate
    from xlapy.runtime.ulps import NAN_MISMATCH, max_ulp_difference

    expected = list(_leaves(evaluate(module, *inputs)))
    for (label, actual), (_, reference) in zip(outputs, expected):
        ulps = max_ulp_difference(actual, reference)
        shown = "NaN mismatch" if ulps == NAN_MISMATCH else f"{ulps} ulp"
        print(f"compare {module.entry.root.name}{label} with the interpreter: max error {shown}")


def _bench(run, repeat: int, backend: str) -> None:
    import statistics
    import time

    if repeat < 1:
        raise XlapyError("--repeat must be at least 1")
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    print(f"bench ({backend}): median {statistics.median(times) * 1e3:.3f} ms, "
          f"best {min(times) * 1e3:.3f} ms over {repeat} runs")


def _indexing(args: argparse.Namespace) -> None:
    from xlapy.indexing import input_to_output_indexing, output_to_input_indexing

    module = _read_module(args.file)
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
        for operand, maps in enumerate(output_to_input_indexing(instr, args.output_id)):
            blocks.append(_indexing_block(f"operand id = {operand} ({instr.operands[operand].name})", maps))
    sys.stdout.write("\n".join(blocks))


def _indexing_block(title: str, maps) -> str:
    texts = sorted("unknown indexing" if m.is_undefined() else str(m) for m in maps)
    return title + "\n" + "".join(f"{t}\n" for t in texts)


def _sdy_propagate(args: argparse.Namespace) -> None:
    from xlapy.errors import ParseError
    from xlapy.frontends.stablehlo import parse_module, print_module, split_input_file
    from xlapy.sharding.propagate import propagate

    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise XlapyError(f"cannot read {args.file}: {e.strerror}") from None
    chunks = split_input_file(text) if args.split_input_file else [(text, 1)]
    outputs = []
    for chunk, first_line in chunks:
        try:
            module = parse_module(chunk, source=args.file,
                                  implicit_manual_replication=args.implicit_manual_replication)
            outputs.append(print_module(propagate(module, args.strategy)))
        except ParseError as e:
            # Report the line in the whole file, not in the chunk.
            raise ParseError(" ".join(e.message.split()), e.line + first_line - 1, e.column, e.source) from None
        except XlapyError as e:
            if "\n" not in str(e):
                raise
            raise type(e)(" ".join(str(e).split())) from None
    # Print only once every chunk succeeded: nothing half-printed.
    sys.stdout.write("// -----\n".join(outputs))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xlapy", description="An XLA-style tensor compiler in Python.")
    parser.add_argument("--version", action="version", version=f"xlapy {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    layout = commands.add_parser(
        "layout", help="draw the physical layout of a (tiled) shape",
        description="Draw where each element of SHAPE lives in its buffer: the logical array "
        "with each element's offset, tiles outlined, padding marked, then the buffer slot by slot.",
    )
    layout.add_argument("shape", metavar="SHAPE", help='a shape in HLO syntax, e.g. "f32[3,5]{1,0:T(2,2)}"')
    layout.add_argument("--svg", metavar="FILE", help="also write the picture as SVG to FILE")
    layout.add_argument("--max-rows", type=int, default=32, help="rows shown per grid (default 32)")
    layout.add_argument("--max-cols", type=int, default=32, help="columns shown per grid (default 32)")
    layout.add_argument("--max-grids", type=int, default=8,
                        help="2-D slices shown for arrays of rank > 2 (default 8)")
    layout.set_defaults(run=_layout)

    run = commands.add_parser(
        "run", help="run an HLO module",
        description="Run the entry computation of an HLO module on seeded random inputs (parameters used as "
        "indices are drawn in range) or on the arrays of --inputs, and print each output's shape, first "
        "values and checksums.",
    )
    run.add_argument("file", metavar="FILE.hlo", help="HLO text, as XLA and JAX print it")
    run.add_argument("--backend", choices=["cpu", "interpreter"], default="cpu",
                     help="compile for the CPU (default) or run the reference interpreter")
    run.add_argument("--inputs", metavar="X.npz", help="arguments, named after the parameters or arg0, arg1, ...")
    run.add_argument("--output", metavar="Y.npz", help="save the outputs as out0, out1, ...")
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    run.add_argument("--compare", action="store_true",
                     help="also run the interpreter and print each output's max error in ulps")
    run.add_argument("--bench", action="store_true", help="time repeated runs and print the median")
    run.add_argument("--repeat", type=int, default=20, metavar="N", help="runs timed by --bench (default 20)")
    run.add_argument("--dump-to", metavar="DIR", help="write the MLIR after each codegen pass into DIR")
    run.add_argument("--dump-pass-re", metavar="RE",
                     help="with --dump-to: only the passes whose name matches RE (e.g. fusion-emitter)")
    run.set_defaults(run=_run)

    indexing = commands.add_parser(
        "indexing", help="print the indexing maps of an instruction",
        description="Print the indexing maps of one instruction (default: the entry root; for a fusion, the maps "
        "composed through its computation) in XLA's syntax, one block per operand (or per output with "
        "--input-to-output).",
    )
    indexing.add_argument("file", metavar="FILE.hlo", help="HLO text, as XLA and JAX print it")
    indexing.add_argument("--instruction", metavar="NAME", help="the instruction (default: the entry root)")
    indexing.add_argument("--input-to-output", action="store_true",
                          help="maps from an operand's indices to the outputs' (default: output to operands)")
    indexing.add_argument("--operand", dest="input_to_output_id", type=int, default=0, metavar="N",
                          help="with --input-to-output: the operand (default 0)")
    indexing.add_argument("--output-id", dest="output_id", type=int, default=0, metavar="N",
                          help="the output of a multi-output instruction (default 0)")
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
    sdy_propagate.add_argument("--implicit-manual-replication", action="store_true",
                               help="take a manual axis that an in/out sharding of a manual computation leaves out "
                               "as replicated (as Shardy and JAX's shard_map do) instead of rejecting it")
    sdy_propagate.set_defaults(run=_sdy_propagate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except XlapyError as e:
        print(f"xlapy: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
