"""Ops with regions: reduce (both pretty forms), while, case, if, sort,
scatter, reduce_window, select_and_scatter, map, and the region terminators."""

from __future__ import annotations

from xlapy.frontends.mlir_syntax import DenseElementsAttr, TensorType, expect_keyword, read_keyword
from xlapy.frontends.stablehlo_ops.common import (
    bool_value,
    format_ints,
    gather_scatter_dims,
    i64_array,
    int_value,
    ints,
    read_int_list,
)
from xlapy.frontends.stablehlo_ops.drafts import ArgDecl, OpDraft
from xlapy.frontends.stablehlo_ops.registry import OpSpec, register
from xlapy.hlo.attributes import WindowDimension
from xlapy.hlo.mlir_structure import encodes_mlir_structure

# Ops that MLIR prints in reduce's compact form `applies stablehlo.add`: one
# result, two operands of one element type, commutative, no regions.
COMPACT_REDUCERS = ("stablehlo.add", "stablehlo.and", "stablehlo.maximum", "stablehlo.minimum",
                    "stablehlo.multiply", "stablehlo.or", "stablehlo.xor")

for _name in ("stablehlo.return", "sdy.return", "func.return"):
    register(OpSpec(_name, "", terminator=True))


def region_names(d: OpDraft) -> tuple[str, ...]:
    return tuple(region.name for region in d.regions)


def check_region(p, d: OpDraft, index: int, args: int | None, results: int | None, what: str) -> None:
    """Region ``index`` of the op takes ``args`` arguments and returns ``results`` values."""
    if index >= len(d.regions):
        raise p.error(f"{d.name} needs {what}", d.pos)
    region = d.regions[index]
    if args is not None and len(region.parameters) != args:
        raise p.error(f"{what} of {d.name} takes {len(region.parameters)} arguments, expected {args}", d.pos)
    returned = p.returned_count(region)
    if results is not None and returned != results:
        raise p.error(f"{what} of {d.name} returns {returned} values, expected {results}", d.pos)


# -- reduce ---------------------------------------------------------------------------------------

def _parse_reduce(p, d: OpDraft) -> None:
    inputs, inits = [], []

    def pair() -> None:
        inputs.append(p.read_operand(d))
        expect_keyword(p.cursor, "init", "in a reduce operand pair")
        p.expect(":", "after 'init'")
        inits.append(p.read_operand(d))

    p.cursor.delimited("(", ")", pair, "a reduce operand")
    while p.eat(","):
        p.cursor.delimited("(", ")", pair, "a reduce operand")
    d.operands = [v for v, _ in inputs] + [v for v, _ in inits]
    d.operand_positions = [pos for _, pos in inputs] + [pos for _, pos in inits]
    reducer = None
    if p.eat_keyword("applies"):
        start = p.cursor.pos
        reducer = read_keyword(p.cursor, "a reducer op name")
        if reducer not in COMPACT_REDUCERS and not reducer.startswith("stablehlo."):
            raise p.error(f"unexpected reducer '{reducer}'", start)
        d.extra["reducer_pos"] = start
    expect_keyword(p.cursor, "across", "in reduce")
    expect_keyword(p.cursor, "dimensions", "in reduce")
    p.expect("=", "after 'dimensions'")
    d.attributes["dimensions"] = i64_array(read_int_list(p.cursor))
    p.attr_dict(d)
    p.expect(":", "before the reduce's type")
    p.functional_type(d)
    n = len(inputs)
    if reducer is not None:
        if n != 1:
            raise p.error("the compact reduce form takes one operand pair", d.extra["reducer_pos"])
        init_type = d.operand_types[1] if d.operand_types and len(d.operand_types) > 1 else None
        element = init_type.element if isinstance(init_type, TensorType) else "f32"
        scalar = TensorType((), element)
        d.regions.append(p.synthetic_region([scalar, scalar], reducer, scalar))
        return
    expect_keyword(p.cursor, "reducer", "to start the reduce body")
    firsts, seconds = [], []
    for _ in range(n):
        args = p.block_args()
        if len(args) != 2:
            raise p.error("each reducer argument pair has two arguments")
        firsts.append(args[0])
        seconds.append(args[1])
    p.region(d, firsts + seconds)


def compact_reducer(q, region, input_type) -> str | None:
    """The op name of ``applies <op>`` if MLIR would print ``region`` in the compact form."""
    params = region.parameters
    body = [i for i in region.instructions if i.opcode != "parameter" and not encodes_mlir_structure(i)]
    if len(params) != 2 or len(body) != 1:
        return None
    op = body[0]
    record = q.record(op)
    if record.name not in COMPACT_REDUCERS or region.root is not op:
        return None
    if list(op.operands) != params or record.attributes or op.sdy_sharding is not None or q.has_location(op):
        return None
    scalar = TensorType((), input_type.element) if isinstance(input_type, TensorType) else None
    if q.value_type(params[0]) != scalar or q.value_type(params[1]) != scalar:
        return None
    return record.name


def _print_reduce(q, instr) -> str:
    n = len(instr.operands) // 2
    inputs, inits = instr.operands[:n], instr.operands[n:]
    pairs = ", ".join(f"({q.use(a)} init: {q.use(b)})" for a, b in zip(inputs, inits))
    dims = format_ints(ints(q.record(instr).attributes["dimensions"]))
    region = instr.called_computations[0]
    reducer = compact_reducer(q, region, q.value_type(inputs[0])) if n == 1 else None
    head = f"{q.op_name(instr)}{pairs}"
    if reducer is not None:
        head += f" applies {reducer}"
    text = f"{head} across dimensions = {dims}{q.attr_dict(instr, ('dimensions',))} : {q.functional(instr)}"
    if reducer is not None:
        return text
    params = region.parameters
    groups = " ".join(f"({q.arg_decl(params[i])}, {q.arg_decl(params[n + i])})" for i in range(n))
    return text + f"\n{q.indent} reducer{groups}  " + q.region(region, label=False)


def _check_reduce(p, d: OpDraft) -> None:
    n = len(d.operands) // 2
    check_region(p, d, 0, 2 * n, n, "the reducer body")


register(OpSpec("stablehlo.reduce", "reduce", _parse_reduce, _print_reduce,
                lambda d: {"dimensions": ints(d.attributes["dimensions"]), "to_apply": d.regions[0].name},
                check=_check_reduce, elided=("dimensions",)))


# -- while ----------------------------------------------------------------------------------------

def _parse_while(p, d: OpDraft) -> None:
    names: list[tuple[str, int]] = []

    def iter_arg() -> None:
        start = p.cursor.pos
        names.append((p.value_name(), start))
        p.expect("=", "after an iteration argument")
        p.operand(d)

    p.cursor.delimited("(", ")", iter_arg, "the while's iteration arguments")
    types = []
    if p.eat(":"):
        types = p.type_list()
    if len(types) != len(names):
        raise p.error(f"the while has {len(names)} iteration arguments and {len(types)} types", d.pos)
    d.operand_types = list(types)
    d.result_types = list(types)
    p.attr_dict_with_keyword(d)
    expect_keyword(p.cursor, "cond", "to start the while's condition")
    args = [ArgDecl(name, type_, pos) for (name, pos), type_ in zip(names, types)]
    p.region(d, args)
    expect_keyword(p.cursor, "do", "to start the while's body")
    p.region(d, args)


def _print_while(q, instr) -> str:
    cond, body = instr.called_computations
    iter_args = ", ".join(f"{q.use(param)} = {q.use(operand)}" for param, operand in zip(cond.parameters,
                                                                                        instr.operands))
    types = ", ".join(str(q.value_type(o)) for o in instr.operands)
    types_text = f" : {types}" if instr.operands else ""
    return (f"{q.op_name(instr)}({iter_args}){types_text}{q.attr_dict(instr, keyword=True)}\n"
            f"{q.indent}cond {q.region(cond, label=False)} do {q.region(body, label=False)}")


def _check_while(p, d: OpDraft) -> None:
    n = len(d.operands)
    check_region(p, d, 0, n, 1, "the condition")
    check_region(p, d, 1, n, n, "the body")


# StableHLO's while, case and if keep their own opcodes: their operands and
# regions differ from HLO's while and conditional (``xlapy.hlo.stablehlo_forms``).
register(OpSpec("stablehlo.while", "stablehlo.while", _parse_while, _print_while,
                lambda d: {"condition": d.regions[0].name, "body": d.regions[1].name}, check=_check_while))


# -- case, if ---------------------------------------------------------------------------------------

def _check_branches(p, d: OpDraft) -> None:
    for i in range(len(d.regions)):
        check_region(p, d, i, 0, len(d.result_types), f"branch {i}")


register(OpSpec("stablehlo.case", "stablehlo.case", hlo=lambda d: {"branch_computations": region_names(d)},
                check=_check_branches))
register(OpSpec("stablehlo.if", "stablehlo.if",
                hlo=lambda d: {"true_computation": d.regions[0].name, "false_computation": d.regions[1].name},
                check=_check_branches))


# -- sort -------------------------------------------------------------------------------------------

def _sort_hlo(d: OpDraft) -> dict:
    rank = d.operand_types[0].rank if d.operand_types and isinstance(d.operand_types[0], TensorType) else 1
    dimension = int_value(d.attributes.get("dimension"), -1)
    hlo: dict = {"dimensions": (dimension % rank if rank else dimension,)}
    if bool_value(d.attributes.get("is_stable")):
        hlo["is_stable"] = True
    hlo["to_apply"] = d.regions[0].name
    return hlo


register(OpSpec("stablehlo.sort", "sort", hlo=_sort_hlo, properties=("dimension", "is_stable"),
                check=lambda p, d: check_region(p, d, 0, 2 * len(d.operands), 1, "the comparator")))


# -- scatter ----------------------------------------------------------------------------------------

def _scatter_hlo(d: OpDraft) -> dict:
    numbers = d.attributes.get("scatter_dimension_numbers")
    hlo = gather_scatter_dims(numbers, ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims"),
                              ("input_batching_dims", "scatter_indices_batching_dims"))
    for name in ("indices_are_sorted", "unique_indices"):
        if bool_value(d.attributes.get(name)):
            hlo[name] = True
    hlo["to_apply"] = d.regions[0].name
    return hlo


def _check_scatter(p, d: OpDraft) -> None:
    n = (len(d.operands) - 1) // 2
    check_region(p, d, 0, 2 * n, n, "the update computation")


register(OpSpec("stablehlo.scatter", "scatter", hlo=_scatter_hlo, check=_check_scatter,
                properties=("indices_are_sorted", "scatter_dimension_numbers", "unique_indices")))


# -- windows ----------------------------------------------------------------------------------------

def window_of(d: OpDraft, dims_attr: str = "window_dimensions") -> tuple[WindowDimension, ...]:
    sizes = ints(d.attributes.get(dims_attr))
    rank = len(sizes)
    strides = ints(d.attributes.get("window_strides"), (1,) * rank)
    base = ints(d.attributes.get("base_dilations"), (1,) * rank)
    window_dilations = ints(d.attributes.get("window_dilations"), (1,) * rank)
    padding = d.attributes.get("padding")
    pads = [tuple(int(x) for x in pair) for pair in padding.array.reshape(-1, 2)] if isinstance(
        padding, DenseElementsAttr) else [(0, 0)] * rank
    return tuple(WindowDimension(size=sizes[i], stride=strides[i], padding_low=pads[i][0], padding_high=pads[i][1],
                                 window_dilation=window_dilations[i], base_dilation=base[i]) for i in range(rank))


def _check_reduce_window(p, d: OpDraft) -> None:
    n = len(d.operands) // 2
    check_region(p, d, 0, 2 * n, n, "the reducer body")


register(OpSpec("stablehlo.reduce_window", "reduce-window",
                hlo=lambda d: {"window": window_of(d), "to_apply": d.regions[0].name}, check=_check_reduce_window,
                properties=("base_dilations", "padding", "window_dilations", "window_dimensions", "window_strides")))


def _check_select_and_scatter(p, d: OpDraft) -> None:
    check_region(p, d, 0, 2, 1, "the select computation")
    check_region(p, d, 1, 2, 1, "the scatter computation")


register(OpSpec("stablehlo.select_and_scatter", "select-and-scatter",
                hlo=lambda d: {"window": window_of(d), "select": d.regions[0].name, "scatter": d.regions[1].name},
                check=_check_select_and_scatter, properties=("padding", "window_dimensions", "window_strides")))
register(OpSpec("stablehlo.map", "map",
                hlo=lambda d: {"dimensions": ints(d.attributes.get("dimensions")), "to_apply": d.regions[0].name},
                check=lambda p, d: check_region(p, d, 0, len(d.operands), 1, "the mapped computation"),
                properties=("dimensions",)))
