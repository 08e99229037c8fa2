"""Parse and print throughput of HLO text: xlapy side by side with XLA's own
parser and printer (through jaxlib), on a generated module of N instructions.

    python -m benchmarks.hlo_text_throughput [--instructions 50000] [--repeat 3]
"""

from __future__ import annotations

import argparse

from jaxlib import _hlo

from benchmarks.timing import best_and_median
from xlapy.hlo import parse_module

_OPS = ["add", "multiply", "subtract", "maximum", "minimum", "divide"]


def generate(instructions: int) -> str:
    """A chain of elementwise ops over two parameters, with broadcasts and
    metadata, as XLA prints modules (one computation, `instructions` lines)."""
    lines = [
        "HloModule generated",
        "",
        "ENTRY %main (p0: f32[128,256], p1: f32[256]) -> f32[128,256] {",
        "  %p0 = f32[128,256]{1,0} parameter(0)",
        "  %p1 = f32[256]{0} parameter(1)",
        "  %b = f32[128,256]{1,0} broadcast(%p1), dimensions={1}",
    ]
    previous = "p0"
    for i in range(instructions - 4):
        op = _OPS[i % len(_OPS)]
        other = "b" if i % 3 else "p0"
        lines.append(f'  %v{i} = f32[128,256]{{1,0}} {op}(%{previous}, %{other}), '
                     f'metadata={{op_name="jit(f)/{op}" source_file="f.py" source_line={i % 997}}}')
        previous = f"v{i}"
    lines.append(f"  ROOT %r = f32[128,256]{{1,0}} negate(%{previous})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    text = generate(args.instructions)
    module = parse_module(text)
    xla_module = _hlo.hlo_module_from_text(text)
    rows = [
        ("parse", best_and_median(lambda: parse_module(text), args.repeat),
         best_and_median(lambda: _hlo.hlo_module_from_text(text), args.repeat)),
        ("print", best_and_median(module.to_text, args.repeat), best_and_median(xla_module.to_string, args.repeat)),
    ]
    size_mb = len(text) / 1e6
    print(f"module: {args.instructions} instructions, {size_mb:.1f} MB of text; best of {args.repeat}")
    print(f"{'':8}{'xlapy s':>10}{'XLA s':>10}{'xlapy/XLA':>11}{'xlapy instr/s':>15}")
    for name, (ours, _), (theirs, _) in rows:
        print(f"{name:8}{ours:10.3f}{theirs:10.3f}{ours / theirs:11.1f}{args.instructions / ours:15,.0f}")


if __name__ == "__main__":
    main()
