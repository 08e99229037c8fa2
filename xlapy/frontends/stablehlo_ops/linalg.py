"""Linear algebra: dot_general, dot, convolution, fft, cholesky, triangular_solve."""

from __future__ import annotations

import re

from xlapy.frontends.mlir_syntax import (
    ArrayAttr,
    BoolAttr,
    DenseElementsAttr,
    DialectAttr,
    TensorType,
    balanced,
    expect_keyword,
    peek_keyword,
    read_int,
    read_keyword,
)
from xlapy.frontends.stablehlo_ops.common import (
    bool_array,
    bool_value,
    enum_attr,
    enum_value,
    format_ints,
    i64_array,
    int_value,
    ints,
    rank_of,
    read_enum_option,
    read_int_list,
    struct_ints,
)
from xlapy.frontends.stablehlo_ops.drafts import OpDraft
from xlapy.frontends.stablehlo_ops.registry import OpSpec, register
from xlapy.hlo.attributes import Verbatim, WindowDimension

PRECISIONS = ("DEFAULT", "HIGH", "HIGHEST")


def _read_precision(p) -> ArrayAttr:
    def one():
        start = p.cursor.pos
        word = read_keyword(p.cursor, "a precision (DEFAULT, HIGH, HIGHEST)")
        if word not in PRECISIONS:
            raise p.error(f"unknown precision '{word}'", start)
        return enum_attr("precision", word)

    return ArrayAttr(tuple(p.cursor.delimited("[", "]", one, "the precisions")))


def _precision_text(attr) -> str:
    return "[" + ", ".join(enum_value(a) for a in attr.items) + "]"


def _operand_precision(d: OpDraft) -> dict:
    config = d.attributes.get("precision_config")
    if not isinstance(config, ArrayAttr):
        return {}
    values = [enum_value(a, "DEFAULT").lower() for a in config.items]
    if all(v == "default" for v in values):
        return {}
    return {"operand_precision": Verbatim("{" + ",".join(values) + "}")}


def _read_pair(p) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lhs = read_int_list(p.cursor)
    expect_keyword(p.cursor, "x", "between the lhs and rhs dimensions")
    return lhs, read_int_list(p.cursor)


def _dot_numbers(batch: tuple, contract: tuple) -> DialectAttr:
    fields = []
    for name, values in (("lhs_batching_dimensions", batch[0]), ("rhs_batching_dimensions", batch[1]),
                         ("lhs_contracting_dimensions", contract[0]), ("rhs_contracting_dimensions", contract[1])):
        if values:
            fields.append(f"{name} = {format_ints(values)}")
    return DialectAttr("stablehlo.dot", ", ".join(fields))


# -- dot_general -------------------------------------------------------------------------------

_DOT_ATTRS = ("dot_dimension_numbers", "precision_config", "algorithm")


def _parse_dot_general(p, d: OpDraft) -> None:
    p.operand(d)
    p.expect(",", "between the dot's operands")
    p.operand(d)
    batch: tuple = ((), ())
    contract: tuple = ((), ())
    while p.eat(","):
        word = peek_keyword(p.cursor)
        start = p.cursor.pos
        if word == "batching_dims":
            read_keyword(p.cursor, "")
            p.expect("=", "after 'batching_dims'")
            batch = _read_pair(p)
        elif word == "contracting_dims":
            read_keyword(p.cursor, "")
            p.expect("=", "after 'contracting_dims'")
            contract = _read_pair(p)
        elif word == "precision":
            read_keyword(p.cursor, "")
            p.expect("=", "after 'precision'")
            d.attributes["precision_config"] = _read_precision(p)
        elif word == "algorithm":
            read_keyword(p.cursor, "")
            p.expect("=", "after 'algorithm'")
            d.attributes["algorithm"] = DialectAttr("stablehlo.dot_algorithm", balanced(p.cursor, "<", ">")[1:-1])
        else:
            raise p.error(f"expected batching_dims, contracting_dims, precision or algorithm, got {p.found()}", start)
    d.attributes["dot_dimension_numbers"] = _dot_numbers(batch, contract)
    p.attr_dict(d)
    p.expect(":", "before the dot's type")
    p.functional_type(d)


def _print_dot_general(q, instr) -> str:
    attrs = q.record(instr).attributes
    numbers = attrs["dot_dimension_numbers"]
    parts = []
    lhs_batch, rhs_batch = struct_ints(numbers, "lhs_batching_dimensions"), struct_ints(numbers,
                                                                                         "rhs_batching_dimensions")
    if lhs_batch or rhs_batch:
        parts.append(f"batching_dims = {format_ints(lhs_batch)} x {format_ints(rhs_batch)}")
    parts.append(f"contracting_dims = {format_ints(struct_ints(numbers, 'lhs_contracting_dimensions'))} x "
                 f"{format_ints(struct_ints(numbers, 'rhs_contracting_dimensions'))}")
    if "precision_config" in attrs:
        parts.append(f"precision = {_precision_text(attrs['precision_config'])}")
    if "algorithm" in attrs:
        parts.append(f"algorithm = <{attrs['algorithm'].body}>")
    return (f"{q.op_name(instr)} {q.uses(instr.operands)}, {', '.join(parts)}"
            f"{q.attr_dict(instr, _DOT_ATTRS)} : {q.functional(instr)}")


def _dot_general_hlo(d: OpDraft) -> dict:
    numbers = d.attributes["dot_dimension_numbers"]
    hlo: dict = {}
    lhs_batch = struct_ints(numbers, "lhs_batching_dimensions")
    rhs_batch = struct_ints(numbers, "rhs_batching_dimensions")
    if lhs_batch:
        hlo["lhs_batch_dims"] = lhs_batch
    hlo["lhs_contracting_dims"] = struct_ints(numbers, "lhs_contracting_dimensions")
    if rhs_batch:
        hlo["rhs_batch_dims"] = rhs_batch
    hlo["rhs_contracting_dims"] = struct_ints(numbers, "rhs_contracting_dimensions")
    hlo.update(_operand_precision(d))
    return hlo


register(OpSpec("stablehlo.dot_general", "dot", _parse_dot_general, _print_dot_general, _dot_general_hlo,
                elided=_DOT_ATTRS))


# -- dot -----------------------------------------------------------------------------------------

def _parse_dot(p, d: OpDraft) -> None:
    p.operand(d)
    p.expect(",", "between the dot's operands")
    p.operand(d)
    if p.eat(","):
        expect_keyword(p.cursor, "precision", "in dot")
        p.expect("=", "after 'precision'")
        d.attributes["precision_config"] = _read_precision(p)
    p.attr_dict(d)
    p.expect(":", "before the dot's type")
    p.functional_type(d)


def _print_dot(q, instr) -> str:
    attrs = q.record(instr).attributes
    precision = f", precision = {_precision_text(attrs['precision_config'])}" if "precision_config" in attrs else ""
    return (f"{q.op_name(instr)} {q.uses(instr.operands)}{precision}{q.attr_dict(instr, ('precision_config',))}"
            f" : {q.functional(instr)}")


def _dot_hlo(d: OpDraft) -> dict:
    lhs_rank = rank_of(d.operand_types[0]) if d.operand_types else 2
    hlo = {"lhs_contracting_dims": (max(lhs_rank - 1, 0),), "rhs_contracting_dims": (0,)}
    hlo.update(_operand_precision(d))
    return hlo


register(OpSpec("stablehlo.dot", "dot", _parse_dot, _print_dot, _dot_hlo, elided=("precision_config",)))


# -- convolution ------------------------------------------------------------------------------------

_CONV_LABELS = re.compile(r"\[([^\]]*)\]\s*x\s*\[([^\]]*)\]\s*->\s*\[([^\]]*)\]")
_WINDOW_ATTRS = {"stride": "window_strides", "pad": "padding", "lhs_dilate": "lhs_dilation",
                 "rhs_dilate": "rhs_dilation", "reverse": "window_reversal"}
_CONV_ATTRS = ("dimension_numbers", *_WINDOW_ATTRS.values())


def _conv_labels(text: str) -> list[list[str]] | None:
    match = _CONV_LABELS.fullmatch(text.strip())
    if not match:
        return None
    return [[item.strip() for item in group.split(",") if item.strip()] for group in match.groups()]


def _parse_convolution(p, d: OpDraft) -> None:
    p.expect("(", "before the convolution's operands")
    p.operand(d)
    p.expect(",", "between the convolution's operands")
    p.operand(d)
    p.expect(")", "after the convolution's operands")
    expect_keyword(p.cursor, "dim_numbers", "in convolution")
    p.expect("=", "after 'dim_numbers'")
    start = p.cursor.pos
    text = []
    for _ in range(3):
        text.append(balanced(p.cursor, "[", "]"))
        if len(text) == 1:
            expect_keyword(p.cursor, "x", "between the input and kernel dimensions")
        elif len(text) == 2:
            p.expect("->", "before the output dimensions")
    labels = _conv_labels(f"{text[0]}x{text[1]}->{text[2]}")
    if labels is None:
        raise p.error("expected dimension numbers like [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]", start)
    d.attributes["dimension_numbers"] = DialectAttr("stablehlo.conv", _labels_text(labels))
    p.expect(",", "before 'window'")
    expect_keyword(p.cursor, "window", "in convolution")
    p.expect("=", "after 'window'")
    p.expect("{", "to start the window")
    while not p.eat("}"):
        start = p.cursor.pos
        key = read_keyword(p.cursor, "a window field")
        if key not in _WINDOW_ATTRS:
            raise p.error(f"unknown window field '{key}'", start)
        p.expect("=", f"after '{key}'")
        if key == "pad":
            pads = p.cursor.delimited("[", "]", lambda: read_int_list(p.cursor), "the padding")
            if any(len(pair) != 2 for pair in pads):
                raise p.error("each window padding is [low, high]", start)
            d.attributes["padding"] = _padding_attr(pads)
        elif key == "reverse":
            def flag() -> bool:
                word = peek_keyword(p.cursor)
                if word in ("true", "false"):
                    read_keyword(p.cursor, "")
                    return word == "true"
                return bool(read_int(p.cursor))
            d.attributes["window_reversal"] = bool_array(p.cursor.delimited("[", "]", flag, "the reversal"))
        else:
            d.attributes[_WINDOW_ATTRS[key]] = i64_array(read_int_list(p.cursor))
        if not p.peek("}"):
            p.expect(",", "between window fields")
    p.attr_dict(d)
    p.expect(":", "before the convolution's type")
    p.functional_type(d)


def _check_labels(labels: list[list[str]], ranks: list[int]) -> None:
    """Each of input, kernel and output names every dimension once, with the same spatial dimensions."""
    spatial = None
    for group, rank, letters in zip(labels, ranks, ("bf", "io", "bf")):
        if len(group) != rank:
            raise ValueError(f"dimension numbers {group} do not fit rank {rank}")
        if sorted(label for label in group if not label.isdigit()) != sorted(letters) or len(set(group)) != len(group):
            raise ValueError(f"dimension numbers {group} need {letters[0]}, {letters[1]} and the spatial dimensions")
        digits = sorted(int(label) for label in group if label.isdigit())
        if digits != list(range(len(digits))) or (spatial is not None and digits != spatial):
            raise ValueError(f"dimension numbers {group} have spatial dimensions {digits}")
        spatial = digits


def _labels_text(labels: list[list[str]]) -> str:
    return "x".join("[" + ", ".join(group) + "]" for group in labels[:2]) + "->[" + ", ".join(labels[2]) + "]"


def _padding_attr(pads) -> DenseElementsAttr:
    import numpy as np

    array = np.array([list(pair) for pair in pads], dtype=np.int64).reshape(len(pads), 2)
    return DenseElementsAttr(TensorType((len(pads), 2), "i64"), array)


def _print_convolution(q, instr) -> str:
    attrs = q.record(instr).attributes
    window = []
    for key, attr in _WINDOW_ATTRS.items():
        if attr not in attrs:
            continue
        value = attrs[attr]
        if key == "pad":
            pairs = value.array.reshape(-1, 2) if isinstance(value, DenseElementsAttr) else []
            window.append("pad = [" + ", ".join(f"[{lo}, {hi}]" for lo, hi in pairs) + "]")
        elif key == "reverse":
            window.append("reverse = [" + ", ".join("true" if v else "false" for v in ints(value)) + "]")
        else:
            window.append(f"{key} = {format_ints(ints(value))}")
    body = attrs["dimension_numbers"].body or ""
    labels = _conv_labels(body)
    numbers = _labels_text(labels) if labels is not None else body
    return (f"{q.op_name(instr)}({q.uses(instr.operands)}) dim_numbers = {numbers}, window = {{{', '.join(window)}}}"
            f"{q.attr_dict(instr, _CONV_ATTRS)} : {q.functional(instr)}")


def _convolution_hlo(d: OpDraft) -> dict:
    labels = _conv_labels(d.attributes["dimension_numbers"].body or "")
    if labels is None:
        raise ValueError("bad convolution dimension numbers")
    _check_labels(labels, [rank_of(t) for t in (d.operand_types or [])[:2]] + [rank_of(t) for t in d.result_types])
    kernel = d.operand_types[1] if d.operand_types else None
    spatial = [i for i, label in enumerate(labels[1]) if label.isdigit()]
    spatial.sort(key=lambda i: int(labels[1][i]))
    count = len(spatial)
    strides = ints(d.attributes.get("window_strides"), (1,) * count)
    pads = d.attributes.get("padding")
    pad_pairs = [tuple(int(x) for x in pair) for pair in pads.array.reshape(-1, 2)] if isinstance(
        pads, DenseElementsAttr) else [(0, 0)] * count
    lhs_dilation = ints(d.attributes.get("lhs_dilation"), (1,) * count)
    rhs_dilation = ints(d.attributes.get("rhs_dilation"), (1,) * count)
    reversal = ints(d.attributes.get("window_reversal"), (0,) * count)
    sizes = [kernel.dims[i] if isinstance(kernel, TensorType) else 1 for i in spatial]
    window = tuple(WindowDimension(size=sizes[k], stride=strides[k], padding_low=pad_pairs[k][0],
                                   padding_high=pad_pairs[k][1], window_dilation=rhs_dilation[k],
                                   base_dilation=lhs_dilation[k], window_reversal=bool(reversal[k]))
                   for k in range(count))
    hlo: dict = {"window": window, "dim_labels": "".join(labels[0]) + "_" + "".join(labels[1]) + "->"
                 + "".join(labels[2])}
    feature = int_value(d.attributes.get("feature_group_count"), 1)
    batch = int_value(d.attributes.get("batch_group_count"), 1)
    if feature != 1:
        hlo["feature_group_count"] = feature
    if batch != 1:
        hlo["batch_group_count"] = batch
    hlo.update(_operand_precision(d))
    return hlo


register(OpSpec("stablehlo.convolution", "convolution", _parse_convolution, _print_convolution, _convolution_hlo,
                elided=_CONV_ATTRS))


# -- fft: `%x, type = FFT, length = [8]` ---------------------------------------------------------------

def _parse_fft(p, d: OpDraft) -> None:
    p.operand(d)
    p.expect(",", "before 'type'")
    kind = read_enum_option(p.cursor, "fft", "type", ("FFT", "IFFT", "RFFT", "IRFFT"), "an FFT type", "FFT type")
    d.attributes["fft_type"] = enum_attr("fft_type", kind)
    p.expect(",", "before 'length'")
    expect_keyword(p.cursor, "length", "in fft")
    p.expect("=", "after 'length'")
    d.attributes["fft_length"] = i64_array(read_int_list(p.cursor))
    p.attr_dict(d)
    p.expect(":", "before the fft's type")
    p.functional_type(d)


def _print_fft(q, instr) -> str:
    attrs = q.record(instr).attributes
    return (f"{q.op_name(instr)} {q.use(instr.operands[0])}, type = {enum_value(attrs['fft_type'])}, "
            f"length = {format_ints(ints(attrs['fft_length']))}{q.attr_dict(instr, ('fft_type', 'fft_length'))}"
            f" : {q.functional(instr)}")


register(OpSpec("stablehlo.fft", "fft", _parse_fft, _print_fft,
                lambda d: {"fft_type": enum_value(d.attributes["fft_type"]),
                           "fft_length": ints(d.attributes["fft_length"])}, elided=("fft_type", "fft_length")))


# -- cholesky: `%a, lower = true : type` ------------------------------------------------------------------

def _parse_cholesky(p, d: OpDraft) -> None:
    p.operand(d)
    if p.eat(","):
        expect_keyword(p.cursor, "lower", "in cholesky")
        p.expect("=", "after 'lower'")
        word = read_keyword(p.cursor, "true or false")
        d.attributes["lower"] = BoolAttr(word == "true")
    p.attr_dict(d)
    p.expect(":", "before the cholesky's type")
    p.same_type_or_functional(d)


def _print_cholesky(q, instr) -> str:
    attrs = q.record(instr).attributes
    lower = f", lower = {attrs['lower']}" if "lower" in attrs else ""
    return (f"{q.op_name(instr)} {q.use(instr.operands[0])}{lower}{q.attr_dict(instr, ('lower',))} : "
            f"{q.same_or_functional(instr)}")


register(OpSpec("stablehlo.cholesky", "cholesky", _parse_cholesky, _print_cholesky,
                lambda d: {"lower": Verbatim("true")} if bool_value(d.attributes.get("lower")) else {},
                elided=("lower",)))


def _triangular_solve_hlo(d: OpDraft) -> dict:
    hlo: dict = {}
    for name in ("left_side", "lower", "unit_diagonal"):
        if bool_value(d.attributes.get(name)):
            hlo[name] = Verbatim("true")
    hlo["transpose_a"] = Verbatim(enum_value(d.attributes.get("transpose_a"), "NO_TRANSPOSE"))
    return hlo


register(OpSpec("stablehlo.triangular_solve", "triangular-solve", hlo=_triangular_solve_hlo,
                properties=("left_side", "lower", "transpose_a", "unit_diagonal")))
