"""Shardy's ops: sharding_constraint, reshard, sharding_group (Shardy's
no-result form and the result form of the compiler API document),
manual_computation, named_computation, data_flow_edge,
propagation_barrier, constant."""

from __future__ import annotations

import re

from xlapy.frontends.mlir_syntax import (
    DialectAttr,
    IntegerAttr,
    ObjectAttr,
    StringAttr,
    eat_keyword,
    expect_keyword,
    quote_string,
    read_int,
    read_keyword,
    read_string,
)
from xlapy.frontends.stablehlo_ops.data_movement import generic_constant, literal_attr
from xlapy.frontends.stablehlo_ops.drafts import OpDraft
from xlapy.frontends.stablehlo_ops.registry import OpSpec, register

DIRECTIONS = ("BOTH", "FORWARD", "BACKWARD", "NONE")
# The enum values the generic form writes (`allowed_direction = 2 : i32`).
_DIRECTION_CODES = {0: "NONE", 1: "FORWARD", 2: "BACKWARD", 3: "BOTH"}


def _object(d: OpDraft, name: str):
    """The xlapy object of Shardy attribute ``name`` (removed from the attributes), or None."""
    attr = d.attributes.pop(name, None)
    if attr is None:
        return None
    if not isinstance(attr, ObjectAttr):
        raise ValueError(f"{name} must be a Shardy attribute, got {attr}")
    return attr.value


def _generic_sharding(p, d: OpDraft) -> None:
    d.sharding = _object(d, "sharding")
    p.note_mesh_uses([d.sharding], d.pos)


def _generic_group(p, d: OpDraft) -> None:
    group = d.attributes.pop("group_id", None)
    if not isinstance(group, IntegerAttr):
        raise ValueError("sdy.sharding_group needs group_id")
    d.hlo_attributes["group_id"] = int(group.value)
    d.hlo_attributes["has_result"] = bool(d.result_types)


def _generic_barrier(p, d: OpDraft) -> None:
    direction = d.attributes.pop("allowed_direction", None)
    if isinstance(direction, IntegerAttr):
        d.hlo_attributes["allowed_direction"] = _DIRECTION_CODES[int(direction.value)]
    elif isinstance(direction, DialectAttr) and direction.body is not None:
        d.hlo_attributes["allowed_direction"] = direction.body.split()[-1]
    else:
        raise ValueError("sdy.propagation_barrier needs allowed_direction")


def _generic_shardings(p, d: OpDraft) -> None:
    ins, outs = _object(d, "in_shardings"), _object(d, "out_shardings")
    if ins is not None:
        d.hlo_attributes["in_shardings"] = tuple(ins)
        p.note_mesh_uses(ins, d.pos)
    if outs is not None:
        d.result_shardings = list(outs)
        p.note_mesh_uses(outs, d.pos)
    axes = d.attributes.pop("manual_axes", None)
    if axes is not None:
        names = re.findall(r'"((?:[^"\\]|\\.)*)"', axes.body or "") if isinstance(axes, DialectAttr) else []
        d.hlo_attributes["manual_axes"] = tuple(names)


def _keyword_eq(p, keyword: str, what: str) -> None:
    """``keyword=`` (Shardy writes no spaces around '=')."""
    expect_keyword(p.cursor, keyword, what)
    p.expect("=", f"after '{keyword}'")


def _tail_same_type(p, d: OpDraft, with_result: bool = True) -> None:
    p.attr_dict(d)
    p.expect(":", "before the op's type")
    type_ = p.type()
    d.operand_types = [type_]
    d.result_types = [type_] if with_result else []


def _one_type(q, instr) -> str:
    return str(q.value_type(instr.operands[0]))


# -- sharding_constraint, reshard: `%x <@mesh, [{"a"}, {?}]> : t` --------------------------------

def _parse_constraint(p, d: OpDraft) -> None:
    p.operand(d)
    d.sharding = p.sharding()
    _tail_same_type(p, d)


def _print_constraint(q, instr) -> str:
    return (f"{q.op_name(instr)} {q.use(instr.operands[0])} {q.sharding_body(instr.sdy_sharding, instr)}"
            f"{q.attr_dict(instr)} : {_one_type(q, instr)}")


for _name in ("sdy.sharding_constraint", "sdy.reshard"):
    register(OpSpec(_name, "", _parse_constraint, _print_constraint, inline_shardings=True,
                    from_generic=_generic_sharding))


# -- sharding_group: `sdy.sharding_group %x group_id=0 : t` / `%0 = sdy.sharding_group %x, id=0 : t` ----

def _parse_sharding_group(p, d: OpDraft) -> None:
    p.operand(d)
    with_result = p.eat(",")
    _keyword_eq(p, "id" if with_result else "group_id", "in sharding_group")
    d.hlo_attributes["group_id"] = read_int(p.cursor)
    d.hlo_attributes["has_result"] = with_result
    _tail_same_type(p, d, with_result)


def _print_sharding_group(q, instr) -> str:
    group = instr.attributes["group_id"]
    middle = f", id={group}" if instr.attributes.get("has_result") else f" group_id={group}"
    return f"{q.op_name(instr)} {q.use(instr.operands[0])}{middle}{q.attr_dict(instr)} : {_one_type(q, instr)}"


register(OpSpec("sdy.sharding_group", "", _parse_sharding_group, _print_sharding_group, from_generic=_generic_group))


# -- data_flow_edge: `%x sharding=<...> : t` ---------------------------------------------------------

def _parse_data_flow_edge(p, d: OpDraft) -> None:
    p.operand(d)
    if eat_keyword(p.cursor, "sharding"):
        p.expect("=", "after 'sharding'")
        d.sharding = p.sharding()
    _tail_same_type(p, d)


def _print_data_flow_edge(q, instr) -> str:
    sharding = f" sharding={q.sharding_body(instr.sdy_sharding, instr)}" if instr.sdy_sharding is not None else ""
    return f"{q.op_name(instr)} {q.use(instr.operands[0])}{sharding}{q.attr_dict(instr)} : {_one_type(q, instr)}"


register(OpSpec("sdy.data_flow_edge", "", _parse_data_flow_edge, _print_data_flow_edge, inline_shardings=True,
                from_generic=_generic_sharding))


# -- propagation_barrier: `%x allowed_direction=BACKWARD : t` ----------------------------------------

def _parse_barrier(p, d: OpDraft) -> None:
    p.operand(d)
    _keyword_eq(p, "allowed_direction", "in propagation_barrier")
    start = p.cursor.pos
    direction = read_keyword(p.cursor, "a direction (BOTH, FORWARD, BACKWARD, NONE)")
    if direction not in DIRECTIONS:
        raise p.error(f"unknown propagation direction '{direction}'", start)
    d.hlo_attributes["allowed_direction"] = direction
    _tail_same_type(p, d)


register(OpSpec("sdy.propagation_barrier", "", _parse_barrier,
                lambda q, i: (f"{q.op_name(i)} {q.use(i.operands[0])} allowed_direction="
                              f"{i.attributes['allowed_direction']}{q.attr_dict(i)} : {_one_type(q, i)}"),
                from_generic=_generic_barrier))


# -- constant --------------------------------------------------------------------------------------

def _parse_constant(p, d: OpDraft) -> None:
    from xlapy.frontends.stablehlo_ops.data_movement import _parse_constant as parse_constant

    parse_constant(p, d)


register(OpSpec("sdy.constant", "constant", _parse_constant,
                lambda q, i: f"{q.op_name(i)}{q.attr_dict(i, ('value',))} {literal_attr(q, i)}", elided=("value",),
                from_generic=generic_constant))


# -- manual_computation -------------------------------------------------------------------------------

def _sharding_list(p) -> list:
    return p.cursor.delimited("[", "]", p.sharding, "a list of shardings")


def _manual_axes(p) -> tuple[str, ...]:
    return tuple(p.cursor.delimited("{", "}", lambda: read_string(p.cursor), "the manual axes"))


def _parse_manual_computation(p, d: OpDraft) -> None:
    p.expect("(", "before the manual computation's operands")
    p.operands(d)
    p.expect(")", "after the manual computation's operands")
    _keyword_eq(p, "in_shardings", "in manual_computation")
    d.hlo_attributes["in_shardings"] = tuple(_sharding_list(p))
    _keyword_eq(p, "out_shardings", "in manual_computation")
    d.result_shardings = _sharding_list(p)
    _keyword_eq(p, "manual_axes", "in manual_computation")
    d.hlo_attributes["manual_axes"] = _manual_axes(p)
    p.region(d, p.block_args())
    p.attr_dict(d)
    p.expect(":", "before the manual computation's type")
    p.functional_type(d)


def shardings_text(q, shardings, instr) -> str:
    return "[" + ", ".join(q.sharding_body(s, instr) for s in shardings) + "]"


def _print_manual_computation(q, instr) -> str:
    body = instr.called_computations[0]
    outs = [r.sdy_sharding for r in q.results(instr)]
    axes = ", ".join(quote_string(a) for a in instr.attributes.get("manual_axes", ()))
    args = ", ".join(q.arg_decl(p) for p in body.parameters)
    return (f"{q.op_name(instr)}({q.uses(instr.operands)}) in_shardings="
            f"{shardings_text(q, instr.attributes.get('in_shardings', ()), instr)} "
            f"out_shardings={shardings_text(q, outs, instr)} manual_axes={{{axes}}} ({args}) "
            f"{q.region(body, label=False)}{q.attr_dict(instr)} : {q.functional(instr)}")


def _check_body(p, d: OpDraft) -> None:
    from xlapy.frontends.stablehlo_ops.control_flow import check_region

    check_region(p, d, 0, len(d.operands), len(d.result_types), "the body")
    if d.result_shardings is not None and len(d.result_shardings) != len(d.result_types):
        raise p.error(f"{d.name} has {len(d.result_types)} results and {len(d.result_shardings)} out_shardings",
                      d.pos)
    shardings = d.hlo_attributes.get("in_shardings")
    if shardings is not None and len(shardings) != len(d.operands):
        raise p.error(f"{d.name} has {len(d.operands)} operands and {len(shardings)} in_shardings", d.pos)


register(OpSpec("sdy.manual_computation", "", _parse_manual_computation, _print_manual_computation,
                check=_check_body, inline_shardings=True, from_generic=_generic_shardings))


# -- named_computation: `sdy.named_computation<"name">(%a) (%arg: t) {...} : (t) -> r` --------------------

def _parse_named_computation(p, d: OpDraft) -> None:
    p.expect("<", "before the computation's name")
    d.attributes["name"] = StringAttr(read_string(p.cursor))
    p.expect(">", "after the computation's name")
    p.expect("(", "before the named computation's operands")
    p.operands(d)
    p.expect(")", "after the named computation's operands")
    if eat_keyword(p.cursor, "in_shardings"):
        p.expect("=", "after 'in_shardings'")
        d.hlo_attributes["in_shardings"] = tuple(_sharding_list(p))
    if eat_keyword(p.cursor, "out_shardings"):
        p.expect("=", "after 'out_shardings'")
        d.result_shardings = _sharding_list(p)
        d.extra["out_shardings"] = True
    p.region(d, p.block_args())
    p.attr_dict(d)
    p.expect(":", "before the named computation's type")
    p.functional_type(d)


def _print_named_computation(q, instr) -> str:
    body = instr.called_computations[0]
    name = q.record(instr).attributes["name"]
    text = f"{q.op_name(instr)}<{name}>({q.uses(instr.operands)})"
    if "in_shardings" in instr.attributes:
        text += f" in_shardings={shardings_text(q, instr.attributes['in_shardings'], instr)}"
    outs = [r.sdy_sharding for r in q.results(instr)]
    if any(s is not None for s in outs):
        text += f" out_shardings={shardings_text(q, outs, instr)}"
    args = ", ".join(q.arg_decl(p) for p in body.parameters)
    return f"{text} ({args}) {q.region(body, label=False)}{q.attr_dict(instr, ('name',))} : {q.functional(instr)}"


register(OpSpec("sdy.named_computation", "", _parse_named_computation, _print_named_computation,
                lambda d: {"name": d.attributes["name"].value}, check=_check_body, elided=("name",),
                inline_shardings=True, from_generic=_generic_shardings))
