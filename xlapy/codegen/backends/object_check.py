"""A check of relocatable object code before LLVM's JIT linker loads it.

The linker trusts its input: a section, symbol or relocation pointing outside
the file (or to a symbol that does not resolve) corrupts memory or aborts the
process, where no Python exception can catch it. ``check_object`` accepts
only what the CPU backend itself produces: a little-endian ELF64 relocatable
object for the host's machine whose every table stays inside the file, whose
relocations are of known kinds and land inside their sections, whose
undefined symbols the process can resolve, and which defines the expected
symbols. Anything else is a ``VerifyError``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

from xlapy.errors import VerifyError

_ELF_MAGIC = b"\x7fELF"
_ELFCLASS64, _ELFDATA2LSB, _ET_REL = 2, 1, 1
_EM_X86_64, _EM_AARCH64 = 62, 183
_SHT_NOBITS, _SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_REL = 8, 2, 3, 4, 9
_SHN_UNDEF, _SHN_LORESERVE, _SHN_ABS, _SHN_COMMON = 0, 0xFF00, 0xFFF1, 0xFFF2
# Section types: NULL, PROGBITS, SYMTAB, STRTAB, RELA, NOBITS, x86-64 unwind tables. Flags: WRITE, ALLOC,
# EXECINSTR, MERGE, STRINGS, INFO_LINK, the x86-64 large-model flag (not TLS, groups or compression).
_SECTION_TYPES = frozenset({0, 1, 2, 3, 4, 8, 0x70000001})
_SECTION_FLAGS = 0x1 | 0x2 | 0x4 | 0x10 | 0x20 | 0x40 | 0x10000000
# Symbol types NOTYPE, OBJECT, FUNC, SECTION, FILE; bindings LOCAL, GLOBAL, WEAK.
_SYMBOL_TYPES = frozenset({0, 1, 2, 3, 4})
_SYMBOL_BINDINGS = frozenset({0, 1, 2})
_HEADER, _SECTION, _SYMBOL, _RELA = struct.Struct("<16sHHIQQQIHHHHHH"), struct.Struct("<IIQQQQIIQQ"), \
    struct.Struct("<IBBHQQ"), struct.Struct("<QQq")

# The relocation kinds of the JIT's large code model (what the backend emits), by machine, with the bytes each
# writes. Narrower kinds are refused: LLVM aborts the process when their target is out of range.
# x86-64: 64, PC64. AArch64: ABS64, PREL64, MOVW_UABS_G0_NC, G1_NC, G2_NC, G3.
# The most bytes all zero-filled (NOBITS) sections may ask the linker to allocate together; the backend's
# kernels keep no such data, and a corrupt size could make the allocation kill the process.
_MAX_NOBITS_BYTES = 1 << 24

_RELOCATIONS: dict[int, dict[int, int]] = {
    _EM_X86_64: {1: 8, 24: 8},
    _EM_AARCH64: {257: 8, 260: 8, 264: 4, 266: 4, 268: 4, 269: 4},
}
_MACHINES = {"x86_64": _EM_X86_64, "aarch64": _EM_AARCH64, "arm64": _EM_AARCH64}


def host_machine(triple: str) -> int | None:
    """The ELF machine of an LLVM target triple, None when objects for it are not checked (not ELF)."""
    arch, _, rest = triple.partition("-")
    if "darwin" in rest or "windows" in rest or "macos" in rest:
        return None
    return _MACHINES.get(arch)


def _fail(message: str) -> VerifyError:
    return VerifyError(f"object code: {message}")


def _unpack(layout: struct.Struct, data: bytes, offset: int, what: str) -> tuple:
    if offset < 0 or offset + layout.size > len(data):
        raise _fail(f"{what} at byte {offset} is outside the {len(data)} bytes of the file")
    return layout.unpack_from(data, offset)


def _name(data: bytes, strtab: tuple[int, int], offset: int) -> str:
    start, size = strtab
    if not 0 <= offset < size:
        raise _fail(f"a name at offset {offset} is outside its string table")
    end = data.find(b"\0", start + offset, start + size)
    if end < 0:
        raise _fail("a name in the string table is not terminated")
    return data[start + offset:end].decode("latin-1")


def check_object(data: bytes, machine: int, required: Iterable[str],
                 resolves: Callable[[str], bool]) -> dict[str, int]:
    """Raises ``VerifyError`` unless ``data`` is an object file the JIT linker can load safely for
    ``machine`` (an ELF ``e_machine``) that defines every symbol in ``required``; ``resolves(name)`` says
    whether the process provides an undefined symbol. Returns the byte size of each defined symbol."""
    ident, e_type, e_machine, _version, _entry, _phoff, shoff, _flags, ehsize, _phentsize, phnum, shentsize, \
        shnum, shstrndx = _unpack(_HEADER, data, 0, "the ELF header")
    if ident[:4] != _ELF_MAGIC:
        raise _fail("not an ELF file")
    if ident[4] != _ELFCLASS64 or ident[5] != _ELFDATA2LSB:
        raise _fail("not a little-endian 64-bit ELF file")
    if e_type != _ET_REL or e_machine != machine:
        raise _fail(f"an ELF file of type {e_type} for machine {e_machine}, not a relocatable object for {machine}")
    if ehsize != _HEADER.size or phnum != 0 or shentsize != _SECTION.size or not 0 < shnum < 1 << 12 \
            or not 0 < shstrndx < shnum:
        raise _fail("malformed ELF header")
    sections = [_unpack(_SECTION, data, shoff + i * _SECTION.size, f"section header {i}") for i in range(shnum)]
    if sections[0][1] != 0:
        raise _fail(f"section 0 has type {sections[0][1]:#x}; it must be the null section")
    nobits = 0
    for i, (_name_offset, sh_type, flags, _addr, offset, size, link, _info, align, _entsize) in enumerate(sections):
        if sh_type not in _SECTION_TYPES or flags & ~_SECTION_FLAGS:
            raise _fail(f"section {i} has type {sh_type:#x} and flags {flags:#x}, which the backend never emits")
        if sh_type != _SHT_NOBITS and (offset < 0 or offset + size > len(data)):
            raise _fail(f"section {i} ({size} bytes at {offset}) is outside the file")
        if link >= shnum or (i and (align < 1 or align & (align - 1) or align > 1 << 16)):
            raise _fail(f"section {i} has a bad link or alignment")
        if sh_type == _SHT_NOBITS:
            nobits += size
            if nobits > _MAX_NOBITS_BYTES:
                raise _fail(f"zero-filled sections of more than {_MAX_NOBITS_BYTES} bytes (section {i} has "
                            f"{size})")
        if sh_type == _SHT_REL:
            raise _fail(f"section {i} has relocations without addends, which the backend never emits")
    for i, section in enumerate(sections):
        if section[1] == _SHT_STRTAB and section[5] and (data[section[4]] != 0 or data[section[4] + section[5] - 1]):
            raise _fail(f"string table {i} does not start and end with a NUL byte")
    if sections[shstrndx][1] != _SHT_STRTAB:
        raise _fail("the section names are not in a string table")
    names = (sections[shstrndx][4], sections[shstrndx][5])
    for section in sections:
        _name(data, names, section[0])
    defined: dict[str, int] = {}
    symbol_places: dict[int, list[tuple[int, int]]] = {}  # symbol table -> (section, value) of each symbol
    for i, (_n, sh_type, _f, _a, offset, size, link, _info, _al, entsize) in enumerate(sections):
        if sh_type != _SHT_SYMTAB:
            continue
        if entsize != _SYMBOL.size or size % _SYMBOL.size or sections[link][1] != _SHT_STRTAB:
            raise _fail(f"symbol table {i} is malformed")
        strtab = (sections[link][4], sections[link][5])
        places = symbol_places[i] = []
        for k in range(size // _SYMBOL.size):
            name_offset, st_info, _other, shndx, value, symbol_size = _SYMBOL.unpack_from(data, offset + k * 24)
            places.append((shndx, value))
            name = _name(data, strtab, name_offset)
            if st_info & 0xF not in _SYMBOL_TYPES or st_info >> 4 not in _SYMBOL_BINDINGS:
                raise _fail(f"symbol {name!r} has a kind or binding the backend never emits")
            if shndx == _SHN_UNDEF and k:
                if not name or st_info & 0xF not in (0, 1, 2) or not resolves(name):
                    raise _fail(f"undefined symbol {name!r} that the process does not provide")
                continue
            if shndx in (_SHN_UNDEF, _SHN_ABS, _SHN_COMMON):
                continue
            if shndx >= _SHN_LORESERVE or shndx >= shnum:
                raise _fail(f"symbol {name!r} is in section {shndx}, which does not exist")
            if value + symbol_size > sections[shndx][5]:
                raise _fail(f"symbol {name!r} extends past the end of its section")
            defined[name] = symbol_size
    kinds = _RELOCATIONS.get(machine, {})
    for i, (_n, sh_type, _f, _a, offset, size, link, target, _al, entsize) in enumerate(sections):
        if sh_type != _SHT_RELA:
            continue
        if entsize != _RELA.size or size % _RELA.size or link not in symbol_places or not 0 < target < shnum:
            raise _fail(f"relocation section {i} is malformed")
        target_size = sections[target][5]
        for k in range(size // _RELA.size):
            r_offset, r_info, addend = _RELA.unpack_from(data, offset + k * _RELA.size)
            symbol, kind = r_info >> 32, r_info & 0xFFFFFFFF
            width = kinds.get(kind)
            if width is None:
                raise _fail(f"relocation {k} of section {i} has kind {kind}, which the backend never emits")
            if symbol >= len(symbol_places[link]) or r_offset + width > target_size:
                raise _fail(f"relocation {k} of section {i} points outside its symbol table or section")
            shndx, value = symbol_places[link][symbol]
            # The address it stores stays inside the symbol's section (an external symbol: the symbol itself).
            limit = 0 if shndx in (_SHN_UNDEF, _SHN_ABS, _SHN_COMMON) else sections[shndx][5] - value
            if not 0 <= addend <= limit:
                raise _fail(f"relocation {k} of section {i} points {addend} bytes from its symbol")
    missing = sorted(set(required) - defined.keys())
    if missing:
        raise _fail(f"does not define {', '.join(missing)}")
    return defined
