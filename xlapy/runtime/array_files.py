"""Arrays in and out of ``.npz`` files, the format of ``xlapy run --inputs`` and ``--output``.

An ``.npz`` file is a zip archive of ``.npy`` members, as ``np.savez`` writes
it. Element types numpy lacks (``bf16``, the ``f8`` family, ``s4``, ``u4``,
``f4e2m1fn``... from ml_dtypes) are written with their ml_dtypes name as the
member's ``descr`` (``'bfloat16'``, ``'float8_e4m3fn'``, ``'int4'``), which
``np.load`` reads back as ml_dtypes arrays once ``ml_dtypes`` is imported. On
reading, a member of raw bytes (``'|V2'``: what ``np.save`` writes for those
types) takes the element type of the parameter it is bound to when the widths
agree.

Files are untrusted: only regular files are opened, headers are parsed
without pickles or code, and a member's size is checked against its
parameter's shape and the memory limit before any of its data is read.
"""

from __future__ import annotations

import ast
import io
import math
import re
import struct
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.files import open_regular_file
from xlapy.memory import check_bytes
from xlapy.shapes import ELEMENT_TYPES, Shape, element_type_of_dtype

_MAGIC = b"\x93NUMPY"
_MAX_HEADER = 1 << 16  # numpy writes headers of a few hundred bytes
# Keys that name no parameter: np.savez(path, *arrays) writes arr_0, arr_1...,
# ``xlapy run --output`` out0, out1...
_UNNAMED = (re.compile(r"arr_(0|[1-9][0-9]*)"), re.compile(r"out(0|[1-9][0-9]*)"))
# ml_dtypes' types by their dtype name ('bfloat16', 'int4', ...): the only
# non-numpy names accepted in a header.
_EXTENSION_TYPES = {t.dtype.name: t.dtype for t in ELEMENT_TYPES.values()
                    if t.dtype is not None and t.dtype.isbuiltin != 1}


@dataclass(frozen=True)
class Member:
    """One array of an archive, as its header declares it."""

    key: str
    info: zipfile.ZipInfo
    dtype: np.dtype  # a plain void dtype ('|V2') for raw bytes
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int

    @property
    def nbytes(self) -> int:
        """The bytes of the member's data (an ``.npy`` array has no padding)."""
        return math.prod(self.shape) * self.dtype.itemsize

    def describe(self) -> str:
        return f"{self.key} ({self.dtype.name}{list(self.shape)})"


class NpzArchive:
    """An ``.npz`` file opened for reading: its members' headers, read up front,
    and their data on demand."""

    def __init__(self, path: str):
        self.path = path
        self._file = file = open_regular_file(path)
        try:
            self._zip = zipfile.ZipFile(file)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError) as e:
            head = _peek(file)
            file.close()
            if head.startswith(_MAGIC):
                raise XlapyError(f"{path} is a single .npy array; give the arrays as an .npz archive "
                                 "(np.savez(path, name=array, ...))") from None
            what = "an empty file" if not head else f"not an .npz (zip) archive: {e}"
            raise XlapyError(f"cannot read {path}: {what}") from None
        try:
            self.members: dict[str, Member] = {}
            for info in self._zip.infolist():
                if info.filename[:-4] in self.members:
                    raise self._error(info.filename, "appears twice in the archive")
                member = self._header(info)
                self.members[member.key] = member
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._zip.close()
        self._file.close()

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _error(self, member: str, message: str) -> XlapyError:
        return XlapyError(f"{self.path}: member {member}: {message}")

    def _header(self, info: zipfile.ZipInfo) -> Member:
        name = info.filename
        if not name.endswith(".npy") or info.is_dir():
            raise self._error(name, "not an .npy array")
        with self._open(info) as fp:
            magic = self._read(fp, name, 8, "the .npy magic")
            if magic[:6] != _MAGIC:
                raise self._error(name, "not an .npy array (bad magic)")
            major = magic[6]
            if major == 1:
                (length,) = struct.unpack("<H", self._read(fp, name, 2, "the header length"))
            elif major in (2, 3):
                (length,) = struct.unpack("<I", self._read(fp, name, 4, "the header length"))
            else:
                raise self._error(name, f"unknown .npy format version {major}.{magic[7]}")
            if length > _MAX_HEADER:
                raise self._error(name, f"header of {length} bytes (at most {_MAX_HEADER})")
            raw = self._read(fp, name, length, "the header")
        dtype, shape, fortran = self._parse_header(name, raw.decode("utf-8" if major == 3 else "latin1",
                                                                    errors="replace"))
        return Member(name[:-4], info, dtype, shape, fortran, 6 + 2 + (2 if major == 1 else 4) + length)

    def _parse_header(self, name: str, text: str) -> tuple[np.dtype, tuple[int, ...], bool]:
        try:
            header = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise self._error(name, "unreadable .npy header") from None
        if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
            raise self._error(name, "the .npy header must have exactly 'descr', 'fortran_order' and 'shape'")
        shape, fortran = header["shape"], header["fortran_order"]
        if not isinstance(shape, tuple) or not all(type(d) is int and d >= 0 for d in shape):
            raise self._error(name, f"bad shape {shape!r}")
        if type(fortran) is not bool:
            raise self._error(name, f"bad fortran_order {fortran!r}")
        return self._dtype(name, header["descr"]), shape, fortran

    def _dtype(self, name: str, descr: object) -> np.dtype:
        if not isinstance(descr, str):
            raise self._error(name, f"holds records ({descr!r}); only arrays of numbers are arguments")
        if descr in _EXTENSION_TYPES:
            return _EXTENSION_TYPES[descr]
        try:
            dtype = np.dtype(descr)
        except (TypeError, ValueError, SyntaxError):
            raise self._error(name, f"unknown element type {descr!r}") from None
        if dtype.kind == "V" and dtype.fields is None and dtype.subdtype is None and dtype.itemsize:
            return dtype  # raw bytes, typed by the parameter
        if dtype.kind not in "biufc" or dtype.fields is not None or dtype.subdtype is not None:
            raise self._error(name, f"holds {dtype} values; only numbers and bools are arguments")
        try:
            element_type_of_dtype(dtype.newbyteorder("="))
        except XlapyError:
            raise self._error(name, f"holds {dtype} values, which no XLA element type has") from None
        return dtype

    def read(self, member: Member, dtype: np.dtype | None = None) -> np.ndarray:
        """The array of ``member`` in native byte order; raw bytes are read as
        ``dtype`` (which must have their width)."""
        source = member.dtype
        if source.kind == "V" and source.name not in _EXTENSION_TYPES:
            if dtype is None or dtype.itemsize != source.itemsize or dtype.name not in _EXTENSION_TYPES:
                want = "" if dtype is None else f" for a {element_type_of_dtype(dtype).name} parameter"
                raise self._error(member.info.filename, f"holds raw {source.itemsize}-byte values ({source.str})"
                                  f"{want}; save bf16, f8 and int4 arrays with ml_dtypes types")
            source = dtype
        check_bytes(member.nbytes, f"reading {member.describe()} from {self.path}")
        with self._open(member.info) as fp:
            self._read(fp, member.info.filename, member.data_offset, "the header")
            raw = self._read(fp, member.info.filename, member.nbytes, "the data")
        array = np.frombuffer(raw, dtype=source)
        array = array.reshape(member.shape[::-1]).transpose() if member.fortran_order else array.reshape(member.shape)
        return np.asarray(array.astype(source.newbyteorder("="), copy=False), order="C")

    def _open(self, info: zipfile.ZipInfo) -> IO[bytes]:
        try:
            return self._zip.open(info)
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, ValueError, OSError, EOFError) as e:
            raise self._error(info.filename, f"cannot be read: {e}") from None

    def _read(self, fp: IO[bytes], name: str, count: int, what: str) -> bytes:
        try:
            data = fp.read(count)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError) as e:
            raise self._error(name, f"cannot be read: {e}") from None
        if len(data) != count:
            raise self._error(name, f"truncated: {what} needs {count} bytes, the member has {len(data)}")
        return data


def _peek(file: IO[bytes]) -> bytes:
    try:
        file.seek(0)
        return file.read(8)
    except (OSError, ValueError):
        return b""


def read_arguments(path: str, parameters: Sequence[tuple[str, Shape]]) -> list[Any]:
    """One argument per parameter ``(name, shape)`` from the ``.npz`` file at
    ``path``: each array keyed by its parameter's name or by ``argN``, or, when
    every key is unnamed (``arr_0``, ``arr_1``, ... as ``np.savez(path, *arrays)``
    writes them, or ``out0``, ``out1``, ... as ``xlapy run --output`` does) and
    none names a parameter, in order. A parameter without an array, an array without a
    parameter, or an array of another shape is an ``XlapyError``. Token
    parameters take no array."""
    with NpzArchive(path) as archive:
        members = archive.members
        wanted = [(i, name, shape) for i, (name, shape) in enumerate(parameters) if shape.element_type != "token"]
        bound = _bind(path, members, wanted)
        for i, name, shape in wanted:
            if shape.tuple_shapes or shape.element_type == "tuple":
                raise XlapyError(f"{path}: parameter {i} ({name}) is a tuple {shape}; --inputs gives arrays only")
            member = bound[i]
            if member.shape != tuple(shape.dimensions):
                raise XlapyError(f"{path}: array {member.describe()} for parameter {i} ({name}) has shape "
                                 f"{list(member.shape)}, expected {shape}")
        return [() if i not in bound else archive.read(bound[i], ELEMENT_TYPES[shape.element_type].dtype)
                for i, (name, shape) in enumerate(parameters)]


def _bind(path: str, members: Mapping[str, Member], wanted: list[tuple[int, str, Shape]]) -> dict[int, Member]:
    keys = list(members)
    names = {n for i, name, _ in wanted for n in (name, f"arg{i}")}
    for pattern in _UNNAMED:
        if not keys or not all(pattern.fullmatch(k) for k in keys) or names & set(keys):
            continue
        prefix = pattern.pattern.split("(")[0]
        by_position = sorted(keys, key=lambda k: int(k[len(prefix):]))
        if by_position != [f"{prefix}{n}" for n in range(len(keys))] or len(keys) != len(wanted):
            raise XlapyError(f"{path} has {len(keys)} unnamed arrays ({', '.join(by_position)}) for "
                             f"{len(wanted)} parameters ({_names(wanted)}); unnamed arrays bind in order, "
                             f"{prefix}0 to the first parameter")
        return {i: members[k] for (i, _, _), k in zip(wanted, by_position)}
    bound: dict[int, Member] = {}
    missing = []
    for i, name, _ in wanted:
        found = [k for k in dict.fromkeys((name, f"arg{i}")) if k in members]
        if len(found) > 1:
            raise XlapyError(f"{path} has two arrays for parameter {i} ({name}): {found[0]} and {found[1]}")
        if found:
            bound[i] = members[found[0]]
        else:
            missing.append(f"{i} ({name})")
    used = {m.key for m in bound.values()}
    extra = [k for k in keys if k not in used]
    if missing or extra:
        problems = []
        if missing:
            problems.append(f"no array for parameter{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        if extra:
            problems.append(f"no parameter for array{'s' if len(extra) > 1 else ''} {', '.join(extra)}")
        raise XlapyError(f"{path}: {'; '.join(problems)} (the file has {', '.join(keys) or 'no arrays'}; the "
                         f"parameters are {_names(wanted)}); name the arrays after the parameters or arg0, "
                         "arg1, ..., or save them all unnamed")
    return bound


def _names(wanted: list[tuple[int, str, Shape]]) -> str:
    return ", ".join(name for _, name, _ in wanted) or "none"


def write_arrays(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Save ``arrays`` as an ``.npz`` file at exactly ``path`` (``np.savez``
    would append ``.npz``), ml_dtypes types under their names."""
    try:
        with open(path, "wb") as file, zipfile.ZipFile(file, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for key, value in arrays.items():
                array = np.asarray(value, order="C")  # ascontiguousarray would make a scalar 1-D
                with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                    member.write(npy_header(array))
                    member.write(memoryview(array.reshape(-1).view(np.uint8)) if array.size else b"")
    except OSError as e:
        raise XlapyError(f"cannot write {path}: {e.strerror or e}") from None


def npy_header(array: np.ndarray) -> bytes:
    """The ``.npy`` header of a C-ordered ``array``, as numpy writes it but with
    ml_dtypes types under their names."""
    name = array.dtype.name
    descr = name if name in _EXTENSION_TYPES else np.lib.format.dtype_to_descr(array.dtype)
    header = {"descr": descr, "fortran_order": False, "shape": tuple(array.shape)}
    buffer = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(buffer, header)
    except ValueError:  # more than 64 KiB: only format 2.0 holds it
        buffer = io.BytesIO()
        np.lib.format.write_array_header_2_0(buffer, header)
    return buffer.getvalue()


__all__ = ["Member", "NpzArchive", "npy_header", "open_regular_file", "read_arguments", "write_arrays"]
