"""Token-level edits of valid text: delete, insert, replace or duplicate a
span, with the tokens that break parsers most (Unicode digits, huge and
negative integers, deep nesting, NaN, huge dimensions)."""

from __future__ import annotations

import random
import re

HUGE_DIMENSIONS = ["9223372036854775808", "9223372036854775807", "4611686018427387904", "50000000", "2147483648",
                   "4294967296", "1000000000000", "65536"]
NUMBERS = ["0", "1", "-1", "-2", "2", "3", "7", "1024", "-9223372036854775809", "1.5", "-0", "1e309", "0x10", "1_0"]
UNICODE = ["١٢", "٣", "𝟙", "²", "Ⅻ", "é", "\u00a0", "\u200b", "\ufeff", "\x00", "\udcff"]
NASTY = ["nan", "NaN", "inf", "-inf", "\"", "'", "\\", "\n", "{", "}", "(", ")", "[", "]", "<", ">", ",", ":", "=",
         "%", "#", "@", "?", "->", "...", "/*", "//", ";", "", " "]


def big_integer(rng: random.Random) -> str:
    return rng.choice(["9" * rng.choice([20, 400, 4301, 5000]), "-" + "9" * 40, "1" + "0" * rng.choice([19, 30])])


def deep_nesting(rng: random.Random, open_: str = "(", close: str = ")") -> str:
    depth = rng.choice([50, 500, 3000, 20000])
    return open_ * depth + rng.choice(["", "f32[1]", "d0", "x"]) + close * depth


def nasty_token(rng: random.Random, vocabulary: list[str]) -> str:
    kind = rng.random()
    if kind < 0.35 and vocabulary:
        return rng.choice(vocabulary)
    if kind < 0.5:
        return rng.choice(HUGE_DIMENSIONS)
    if kind < 0.65:
        return rng.choice(NUMBERS)
    if kind < 0.72:
        return big_integer(rng)
    if kind < 0.8:
        return rng.choice(UNICODE)
    if kind < 0.83:
        return deep_nesting(rng, *rng.choice([("(", ")"), ("[", "]"), ("{", "}")]))
    return rng.choice(NASTY)


_TOKEN = re.compile(r"\s+|[A-Za-z_][\w.\-]*|-?\d+(?:\.\d+)?|.", re.S)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def mutate(text: str, rng: random.Random, vocabulary: list[str], edits: int | None = None) -> str:
    """``text`` after 1-4 random token edits; ``vocabulary``: the source's own
    tokens (opcodes, names, attributes), so that many results still parse."""
    parts = tokens(text)
    for _ in range(edits or rng.choice([1, 1, 1, 2, 2, 3, 4])):
        if not parts:
            parts = [nasty_token(rng, vocabulary)]
            continue
        i = rng.randrange(len(parts))
        width = rng.choice([1, 1, 1, 2, 3, 5])
        kind = rng.choice(["delete", "insert", "replace", "replace", "duplicate", "number"])
        if kind == "delete":
            del parts[i:i + width]
        elif kind == "insert":
            parts.insert(i, nasty_token(rng, vocabulary))
        elif kind == "replace":
            parts[i:i + width] = [nasty_token(rng, vocabulary)]
        elif kind == "duplicate":
            parts[i:i] = parts[i:i + width] * rng.choice([1, 2, 50])
        else:
            # Numbers are where shapes, indices and attributes live: change one.
            numeric = [j for j, p in enumerate(parts) if p.lstrip("-").isdigit() and p.isascii() and len(p) < 30]
            if numeric:
                j = rng.choice(numeric)
                parts[j] = rng.choice(HUGE_DIMENSIONS + NUMBERS + [str(int(parts[j]) + rng.choice([-1, 1, 1000]))])
    return "".join(parts)


def vocabulary_of(texts: tuple[str, ...], limit: int = 400) -> list[str]:
    seen: dict[str, None] = {}
    for text in texts:
        for token in tokens(text):
            if not token.isspace():
                seen.setdefault(token, None)
    return list(seen)[:limit * 10:10] + list(seen)[:limit]


def corrupt_bytes(data: bytes, rng: random.Random) -> bytes:
    """Byte-level damage for files: non-UTF-8 bytes, truncation, flips."""
    kind = rng.choice(["invalid_utf8", "truncate", "flip", "bom", "nul"])
    if not data:
        return b"\xff"
    i = rng.randrange(len(data))
    if kind == "invalid_utf8":
        return data[:i] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"]) + data[i:]
    if kind == "truncate":
        return data[:i]
    if kind == "flip":
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
    if kind == "bom":
        return rng.choice([b"\xef\xbb\xbf", b"\xff\xfe"]) + data
    return data[:i] + b"\x00" + data[i:]
