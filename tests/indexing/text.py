"""Comparing printed maps with the texts of XLA's docs/indexing.md and tests, which differ in
line breaks and spacing only."""


def squeeze(text: str) -> str:
    """``text`` without any whitespace."""
    return "".join(text.split())
