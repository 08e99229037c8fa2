"""The check of object code before LLVM's JIT linker loads it (a pure-Python reading of the ELF file: the
malformed files here never reach LLVM)."""

from __future__ import annotations

import struct

import llvmlite.binding as llvm
import pytest

import xlapy
from xlapy.codegen.backends.cpu import host_target
from xlapy.codegen.backends.object_check import check_object, host_machine
from xlapy.errors import VerifyError

MACHINE = host_machine(host_target()[0])
pytestmark = pytest.mark.skipif(MACHINE is None, reason="object code of this host is not ELF")
SECTION = struct.Struct("<IIQQQQIIQQ")
REQUIRED = ("main", "main.signature")


def _resolves(name: str) -> bool:
    return bool(llvm.address_of_symbol(name))


@pytest.fixture(scope="module")
def code() -> bytes:
    module = xlapy.parse_hlo("""HloModule m
f { a = f32[64] parameter(0)  ROOT e = f32[64] exponential(a) }
ENTRY e { p = f32[64] parameter(0)  ROOT fusion = f32[64] fusion(p), kind=kLoop, calls=f }
""")
    (kernel,) = xlapy.compile(module).kernels.values()
    return kernel.object_code


def _sections(code: bytes) -> list[tuple]:
    (shoff,) = struct.unpack_from("<Q", code, 40)
    (shnum,) = struct.unpack_from("<H", code, 60)
    return [SECTION.unpack_from(code, shoff + i * SECTION.size) for i in range(shnum)]


def _section_header_offset(code: bytes, index: int) -> int:
    return struct.unpack_from("<Q", code, 40)[0] + index * SECTION.size


def _first(code: bytes, sh_type: int) -> int:
    return next(i for i, s in enumerate(_sections(code)) if s[1] == sh_type)


def _patch(code: bytes, offset: int, fmt: str, value: int) -> bytes:
    data = bytearray(code)
    struct.pack_into(fmt, data, offset, value)
    return bytes(data)


def test_the_backends_own_object_code_passes(code):
    symbols = check_object(code, MACHINE, REQUIRED, _resolves)
    assert symbols["main.signature"] % 8 == 0


def _relocation_offset(code: bytes) -> int:
    return _sections(code)[_first(code, 4)][4]


def _symbol_table(code: bytes) -> tuple[int, int]:
    section = _sections(code)[_first(code, 2)]
    return section[4], section[5] // 24


@pytest.mark.parametrize("edit, message", [
    (lambda c: c[:1] + b"X" + c[2:], "not an ELF file"),
    (lambda c: _patch(c, 18, "<H", 3), "for machine 3"),
    (lambda c: _patch(c, 40, "<Q", len(c)), "outside the"),
    (lambda c: _patch(c, _section_header_offset(c, 1) + 8, "<Q", 0x400 | 2), "flags 0x402"),  # TLS
    (lambda c: _patch(c, _section_header_offset(c, 1) + 48, "<Q", 0), "bad link or alignment"),
    (lambda c: _patch(c, _relocation_offset(c) + 16, "<q", 1 << 40), "bytes from its symbol"),
    (lambda c: _patch(c, _relocation_offset(c) + 8, "<Q", 1 << 32 | 2), "kind 2"),  # PC32
    (lambda c: _patch(c, _relocation_offset(c) + 8, "<Q", 1000 << 32 | 1), "outside its symbol table"),
    (lambda c: _patch(c, _relocation_offset(c), "<Q", 1 << 30), "outside its symbol table or section"),
    # Section 0 as a symbol table whose string table is far past the last section.
    (lambda c: _patch(_patch(_patch(c, _section_header_offset(c, 0) + 4, "<I", 2), _section_header_offset(c, 0) + 56,
                             "<Q", 24), _section_header_offset(c, 0) + 40, "<I", 60000), "must be the null section"),
    (lambda c: _patch(c, _section_header_offset(c, 0) + 40, "<I", 60000), "section 0 has a bad link"),
    # Code turned into a zero-filled section of 2^60 bytes, which the linker would try to allocate.
    (lambda c: _patch(_patch(c, _section_header_offset(c, _first(c, 1)) + 4, "<I", 8),
                      _section_header_offset(c, _first(c, 1)) + 32, "<Q", 1 << 60),
     "zero-filled sections of more than"),
])
def test_malformed_objects_are_refused(code, edit, message):
    with pytest.raises(VerifyError, match=message):
        check_object(edit(code), MACHINE, REQUIRED, _resolves)


def test_missing_symbols_and_unresolved_externals_are_refused(code):
    with pytest.raises(VerifyError, match="does not define other"):
        check_object(code, MACHINE, (*REQUIRED, "other"), _resolves)
    # Every symbol undefined: the named ones must come from the process, which this one refuses.
    offset, count = _symbol_table(code)
    undefined = code
    for k in range(1, count):
        undefined = _patch(undefined, offset + 24 * k + 6, "<H", 0)
    with pytest.raises(VerifyError, match=r"undefined symbol|kind or binding"):
        check_object(undefined, MACHINE, REQUIRED, lambda name: False)
