"""Calls and ops of no other family: func.call, custom_call, composite,
optimization_barrier, partition/replica ids, tokens, random numbers, top_k."""

from __future__ import annotations

from xlapy.frontends.mlir_syntax import (
    ArrayAttr,
    BoolAttr,
    DictAttr,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
    expect_keyword,
    read_int,
    read_keyword,
    read_string,
    read_symbol,
)
from xlapy.frontends.stablehlo_ops.common import (
    I64,
    bool_value,
    enum_attr,
    enum_value,
    int_value,
    read_enum_option,
    string_value,
)
from xlapy.frontends.stablehlo_ops.drafts import OpDraft
from xlapy.frontends.stablehlo_ops.registry import OpSpec, register
from xlapy.hlo.attributes import Verbatim

# -- func.call: `call @f(%a) : (t) -> r` -------------------------------------------------------


def _parse_call(p, d: OpDraft) -> None:
    p.cursor.skip_space()
    start = p.cursor.pos
    d.attributes["callee"] = SymbolRefAttr((read_symbol(p.cursor, "the called function"),))
    d.extra["callees"] = [(d.attributes["callee"].name, start)]
    p.expect("(", "before the call's arguments")
    p.operands(d)
    p.expect(")", "after the call's arguments")
    p.attr_dict(d)
    p.expect(":", "before the call's type")
    p.functional_type(d)


def _print_call(q, instr) -> str:
    callee = q.record(instr).attributes["callee"]
    return f"{q.op_name(instr)} {callee}({q.uses(instr.operands)}){q.attr_dict(instr, ('callee',))} : " \
           f"{q.functional(instr)}"


def _generic_call(p, d: OpDraft) -> None:
    callee = d.attributes.get("callee")
    if not isinstance(callee, SymbolRefAttr):
        raise ValueError("func.call needs callee = @function")
    d.extra["callees"] = [(callee.name, d.pos)]


register(OpSpec("func.call", "call", _parse_call, _print_call, elided=("callee",), from_generic=_generic_call))


# -- custom_call: `stablehlo.custom_call @target(%a) {attrs} : (t) -> r` -------------------------------

API_VERSIONS = {1: "API_VERSION_ORIGINAL", 2: "API_VERSION_STATUS_RETURNING",
                3: "API_VERSION_STATUS_RETURNING_UNIFIED", 4: "API_VERSION_TYPED_FFI"}


def _parse_custom_call(p, d: OpDraft) -> None:
    d.attributes["call_target_name"] = StringAttr(read_symbol(p.cursor, "the custom call target"))
    p.expect("(", "before the custom call's operands")
    p.operands(d)
    p.expect(")", "after the custom call's operands")
    p.attr_dict(d)
    p.expect(":", "before the custom call's type")
    p.functional_type(d)
    _custom_call_callees(d)


def _custom_call_callees(d: OpDraft) -> None:
    called = d.attributes.get("called_computations")
    if isinstance(called, ArrayAttr):
        d.extra["callees"] = [(item.name, d.pos) for item in called.items if isinstance(item, SymbolRefAttr)]


def _print_custom_call(q, instr) -> str:
    attrs = q.record(instr).attributes
    target = SymbolRefAttr((string_value(attrs.get("call_target_name")),))
    # Attributes at their default value are not printed.
    elided = ["call_target_name"]
    if int_value(attrs.get("api_version"), 1) == 1 and isinstance(attrs.get("api_version"), IntegerAttr):
        elided.append("api_version")
    if "has_side_effect" in attrs and not bool_value(attrs["has_side_effect"]):
        elided.append("has_side_effect")
    return f"{q.op_name(instr)} {target}({q.uses(instr.operands)}){q.attr_dict(instr, tuple(elided))} : " \
           f"{q.functional(instr)}"


def _custom_call_hlo(d: OpDraft) -> dict:
    attrs = d.attributes
    hlo: dict = {"custom_call_target": string_value(attrs.get("call_target_name"))}
    if bool_value(attrs.get("has_side_effect")):
        hlo["custom_call_has_side_effect"] = True
    version = int_value(attrs.get("api_version"), 1)
    if version != 1:
        hlo["api_version"] = API_VERSIONS.get(version, str(version))
    config = attrs.get("backend_config")
    if isinstance(config, StringAttr) and config.value:
        hlo["backend_config"] = config.value
    elif isinstance(config, DictAttr):
        hlo["backend_config"] = str(config)
    elif isinstance(attrs.get("mhlo.backend_config"), DictAttr):
        hlo["backend_config"] = str(attrs["mhlo.backend_config"])
    if d.extra.get("callees"):
        hlo["called_computations"] = tuple(name for name, _ in d.extra["callees"])
    return hlo


register(OpSpec("stablehlo.custom_call", "custom-call", _parse_custom_call, _print_custom_call, _custom_call_hlo,
                elided=("call_target_name",), from_generic=lambda p, d: _custom_call_callees(d)))


# -- composite: `stablehlo.composite "name" %a {decomposition = @f, ...} : (t) -> r` -------------------

def _parse_composite(p, d: OpDraft) -> None:
    d.attributes["name"] = StringAttr(read_string(p.cursor))
    p.operands(d)
    p.attr_dict(d)
    p.expect(":", "before the composite's type")
    p.functional_type(d)
    _composite_callee(p, d)


def _composite_callee(p, d: OpDraft) -> None:
    decomposition = d.attributes.get("decomposition")
    if isinstance(decomposition, SymbolRefAttr):
        d.extra["callees"] = [(decomposition.name, d.pos)]


def _print_composite(q, instr) -> str:
    name = q.record(instr).attributes["name"]
    return f"{q.op_name(instr)} {name} {q.uses(instr.operands)}{q.attr_dict(instr, ('name',))} : " \
           f"{q.functional(instr)}"


register(OpSpec("stablehlo.composite", "call", _parse_composite, _print_composite,
                lambda d: {"is_composite": Verbatim("true")}, elided=("name",), from_generic=_composite_callee))


# -- optimization_barrier: `{attrs} %a, %b : t1, t2`, or `{attrs}()` -------------------------------------

def _parse_barrier(p, d: OpDraft) -> None:
    # MLIR writes the attributes before the operands (as Shardy prints a barrier's
    # shardings); after them is read too, the order earlier versions of xlapy printed.
    p.attr_dict(d)
    p.cursor.skip_space()
    if not p.peek("%"):
        p.expect("(", "or a value after optimization_barrier (no operands are written '()')")
        p.expect(")", "after '(' of an optimization_barrier without operands")
        d.operand_types, d.result_types = [], []
        return
    p.operands(d)
    p.attr_dict(d)
    p.expect(":", "before the optimization_barrier's types")
    types = p.type_list()
    d.operand_types = list(types)
    d.result_types = list(types)


def _print_barrier(q, instr) -> str:
    head = f"{q.op_name(instr)}{q.attr_dict(instr)}"
    if not instr.operands:
        return head + "()"
    types = ", ".join(str(q.value_type(o)) for o in instr.operands)
    return f"{head} {q.uses(instr.operands)} : {types}"


# Variadic, one result per operand: not HLO's opt-barrier of one (tuple) operand.
register(OpSpec("stablehlo.optimization_barrier", "stablehlo.optimization_barrier", _parse_barrier, _print_barrier))


# -- ops of no operands: `stablehlo.partition_id : tensor<ui32>` --------------------------------------

def _parse_nullary(p, d: OpDraft) -> None:
    p.attr_dict(d)
    p.expect(":", "before the op's type")
    d.operand_types = []
    d.result_types = [p.type()]


def _print_nullary(q, instr) -> str:
    return f"{q.op_name(instr)}{q.attr_dict(instr)} : {q.result_types(instr)[0]}"


register(OpSpec("stablehlo.partition_id", "partition-id", _parse_nullary, _print_nullary))
register(OpSpec("stablehlo.replica_id", "replica-id", _parse_nullary, _print_nullary))
register(OpSpec("stablehlo.create_token", "after-all", _parse_nullary, _print_nullary))


def _parse_after_all(p, d: OpDraft) -> None:
    p.operands(d)
    p.attr_dict(d)
    p.expect(":", "before the op's type")
    result = p.type()
    d.result_types = [result]
    d.operand_types = [result] * len(d.operands)


register(OpSpec("stablehlo.after_all", "after-all", _parse_after_all,
                lambda q, i: f"{q.op_name(i)} {q.uses(i.operands)}{q.attr_dict(i)} : {q.result_types(i)[0]}"))


# -- random numbers ----------------------------------------------------------------------------------

_RNG_ALGORITHMS = {"DEFAULT": "rng_default", "THREE_FRY": "rng_three_fry", "PHILOX": "rng_philox"}


def _parse_rng_bit_generator(p, d: OpDraft) -> None:
    p.operand(d)
    p.expect(",", "before 'algorithm'")
    algorithm = read_enum_option(p.cursor, "rng_bit_generator", "algorithm", _RNG_ALGORITHMS, "an RNG algorithm",
                                 "RNG algorithm")
    d.attributes["rng_algorithm"] = enum_attr("rng_algorithm", algorithm)
    p.attr_dict(d)
    p.expect(":", "before the op's type")
    p.functional_type(d)


register(OpSpec("stablehlo.rng_bit_generator", "rng-bit-generator", _parse_rng_bit_generator,
                lambda q, i: (f"{q.op_name(i)} {q.use(i.operands[0])}, algorithm = "
                              f"{enum_value(q.record(i).attributes['rng_algorithm'])}"
                              f"{q.attr_dict(i, ('rng_algorithm',))} : {q.functional(i)}"),
                lambda d: {"algorithm": _RNG_ALGORITHMS[enum_value(d.attributes["rng_algorithm"])]},
                elided=("rng_algorithm",), result_names=("output_state", "output")))


def _parse_rng(p, d: OpDraft) -> None:
    p.operands(d)
    p.expect(",", "before 'distribution'")
    distribution = read_enum_option(p.cursor, "rng", "distribution", ("UNIFORM", "NORMAL"), "UNIFORM or NORMAL",
                                    "distribution")
    d.attributes["rng_distribution"] = enum_attr("rng_distribution", distribution)
    p.attr_dict(d)
    p.expect(":", "before the op's type")
    p.functional_type(d)


# The result's dimensions are a third operand: not HLO's rng of two.
register(OpSpec("stablehlo.rng", "stablehlo.rng", _parse_rng,
                lambda q, i: (f"{q.op_name(i)} {q.uses(i.operands)}, distribution = "
                              f"{enum_value(q.record(i).attributes['rng_distribution'])}"
                              f"{q.attr_dict(i, ('rng_distribution',))} : {q.functional(i)}"),
                lambda d: {"distribution": "rng_" + enum_value(d.attributes["rng_distribution"]).lower()},
                elided=("rng_distribution",)))


# -- top k: `chlo.top_k(%x, k = 3) : t -> (t, t)`, `mhlo.topk(%x, k = 3, largest = false) : ...` ------------
# Both are HLO's topk. XLA prints mhlo.topk when it converts HLO to MLIR; its
# `largest` (default true) is written only when false. chlo.top_k takes the
# largest (XLA's conversion to HLO ignores a `largest` attribute on it).

def _top_k(name: str, has_largest: bool) -> None:
    """Register a top k op; ``has_largest``: its syntax (and HLO) has ``largest``."""

    def parse(p, d: OpDraft) -> None:
        p.expect("(", "before the top k's operand")
        p.operand(d)
        p.expect(",", "before 'k'")
        expect_keyword(p.cursor, "k", "in the top k")
        p.expect("=", "after 'k'")
        d.attributes["k"] = IntegerAttr(read_int(p.cursor), I64)
        if has_largest and p.eat(","):
            expect_keyword(p.cursor, "largest", f"in {name}")
            p.expect("=", "after 'largest'")
            start = p.cursor.pos
            word = read_keyword(p.cursor, "true or false")
            if word not in ("true", "false"):
                raise p.error(f"expected true or false, got '{word}'", start)
            d.attributes["largest"] = BoolAttr(word == "true")
        p.expect(")", "after the top k's operands")
        p.attr_dict(d)
        p.expect(":", "before the top k's type")
        d.operand_types = [p.type()]
        p.expect("->", "in the top k's type")
        p.result_type_list(d)

    def largest(attrs: dict) -> bool:
        return not has_largest or bool_value(attrs.get("largest", BoolAttr(True)))

    def print_(q, instr) -> str:
        attrs = q.record(instr).attributes
        inside = f"{q.use(instr.operands[0])}, k = {int_value(attrs['k'])}"
        if not largest(attrs):
            inside += ", largest = false"
        return (f"{q.op_name(instr)}({inside}){q.attr_dict(instr, elided)} : {q.value_type(instr.operands[0])} -> "
                f"({', '.join(map(str, q.result_types(instr)))})")

    def hlo(d: OpDraft) -> dict:
        return {"k": int_value(d.attributes["k"]), "largest": Verbatim("true" if largest(d.attributes) else "false")}

    elided = ("k", "largest") if has_largest else ("k",)
    register(OpSpec(name, "topk", parse, print_, hlo, elided=elided, properties=elided,
                    result_names=("values", "indices")))


_top_k("chlo.top_k", has_largest=False)
_top_k("mhlo.topk", has_largest=True)


def _batch_norm_hlo(d: OpDraft) -> dict:
    epsilon = d.attributes.get("epsilon")
    value = float(epsilon.value) if epsilon is not None else 0.0
    feature = int_value(d.attributes.get("feature_index"))
    return {"epsilon": Verbatim(f"{value:g}"), "feature_index": Verbatim(str(feature))}


_BATCH_NORM = ("epsilon", "feature_index")
register(OpSpec("stablehlo.batch_norm_training", "batch-norm-training", hlo=_batch_norm_hlo, properties=_BATCH_NORM,
                result_names=("output", "batch_mean", "batch_var")))
register(OpSpec("stablehlo.batch_norm_inference", "batch-norm-inference", hlo=_batch_norm_hlo,
                properties=_BATCH_NORM))
register(OpSpec("stablehlo.batch_norm_grad", "batch-norm-grad", hlo=_batch_norm_hlo, properties=_BATCH_NORM,
                result_names=("grad_operand", "grad_scale", "grad_offset")))
