"""Comparing printed maps with the SPEC's and XLA's texts, which differ in
line breaks and spacing only."""


def squeeze(text: str) -> str:
    """``text`` without any whitespace."""
    return "".join(text.split())
