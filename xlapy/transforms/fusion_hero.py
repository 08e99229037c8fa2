"""The hero of a fusion: the op that decides how it is best emitted, as XLA's
``FindNonTrivialHero`` (``xla/service/gpu/ir_emission_utils.cc``) finds it,
and the emitter kind XLA would pick from the heroes
(``HloFusionAnalysis::GetEmitterFusionKind``, ``xla/service/gpu/hlo_fusion_analysis.cc``).

The fusion passes emit every fusion as ``kind=kLoop`` (the loop emitter runs
all of them); the kind is not recorded in the IR: emitters that want a hero
call ``fusion_kind_of`` on the fusion.

From a root, the hero walk goes up through "intermediate" ops: elementwise
ops (a copy only if it keeps the layout), bitcasts and reshapes/transposes
that are bitcasts, with one operand. Then it looks further, through
intermediate ops of up to three operands, for a single transpose the tiled
transpose emitter handles or, failing that, a single concatenate, from which
no non-intermediate op is reachable downwards. A reduce reached by the first
walk is the hero; anything else leaves the root its own hero.
"""

from __future__ import annotations

from collections import deque

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import ELEMENT_TYPES, Shape
from xlapy.transforms.fusible_ops import CONCATENATE_HERO_MAX_OPERANDS, is_elementwise
from xlapy.transforms.normalization_fusion import is_normalization_computation

# Thresholds of the tiled transpose emitter (``ir_emission_utils.h``).
MIN_DIMENSION_TO_TRANSPOSE_TILED = 16
MIN_DIMENSION_TO_TRANSPOSE_TILED_2 = 8
MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED = 64 * 128
MAX_BYTES_IN_MOST_MINOR_DIMENSION = 8


def _physical_order(shape: Shape) -> list[int]:
    """Dimensions from major to minor."""
    return list(reversed(shape.layout_or_default.minor_to_major))


def _is_bitcast_reshape(instr: HloInstruction) -> bool:
    """A reshape that keeps every element at its place in memory (default layouts: dropping or adding unit
    dimensions and splitting or merging dimensions in order)."""
    source, target = instr.operands[0].shape, instr.shape
    if _physical_order(source) != list(range(len(source.dimensions))):
        return False
    return _physical_order(target) == list(range(len(target.dimensions)))


def _is_bitcast_transpose(instr: HloInstruction) -> bool:
    """A transpose that moves only unit dimensions (in default layouts)."""
    permutation = list(instr.attr("dimensions") or ())
    operand = instr.operands[0].shape
    moved = [p for p in permutation if operand.dimensions[p] != 1]
    return moved == sorted(moved) and _physical_order(operand) == list(range(len(operand.dimensions))) \
        and _physical_order(instr.shape) == list(range(len(instr.shape.dimensions)))


def is_intermediate(instr: HloInstruction, allowed_operand_count: int = 1) -> bool:
    """XLA's ``IsIntermediate``: an op a hero may be found through."""
    if not 1 <= len(instr.operands) <= allowed_operand_count:
        return False
    if is_elementwise(instr):
        if instr.opcode == "copy":
            return instr.shape == instr.operands[0].shape
        return True
    if instr.opcode == "bitcast":
        return True
    if instr.opcode == "reshape":
        return _is_bitcast_reshape(instr)
    if instr.opcode == "transpose":
        return _is_bitcast_transpose(instr)
    return False


def normalized_transpose(instr: HloInstruction) -> tuple[list[int], list[int]] | None:
    """The transpose's output dimensions and permutation once unit dimensions
    are dropped and dimensions that stay adjacent are merged (XLA's
    ``GetNormalizedLogicalTransposeShape``); None when nothing moves."""
    permutation = list(instr.attr("dimensions") or ())
    operand = instr.operands[0].shape.dimensions
    kept = [p for p in permutation if operand[p] != 1]
    if not kept:
        return None
    # Rank the kept operand dimensions, then merge runs that stay consecutive.
    ranks = {p: k for k, p in enumerate(sorted(kept))}
    groups: list[list[int]] = []
    for p in kept:
        if groups and ranks[p] == ranks[groups[-1][-1]] + 1:
            groups[-1].append(p)
        else:
            groups.append([p])
    if len(groups) < 2:
        return None
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])
    position = {g: k for k, g in enumerate(order)}
    dimensions = []
    for group in groups:
        size = 1
        for p in group:
            size *= operand[p]
        dimensions.append(size)
    return dimensions, [position[g] for g in range(len(groups))]


def tiled_transpose(instr: HloInstruction) -> tuple[list[int], list[int]] | None:
    """XLA's ``GetDescriptionForTiledTransposeEmitter``: the normalized
    dimensions and permutation when the tiled transpose emitter is worth
    using for ``instr``."""
    if instr.opcode != "transpose":
        return None
    normalized = normalized_transpose(instr)
    if normalized is None:
        return None
    dimensions, permutation = normalized
    operand_dimensions = [0] * len(dimensions)
    for k, p in enumerate(permutation):
        operand_dimensions[p] = dimensions[k]
    byte_width = ELEMENT_TYPES[instr.shape.element_type].byte_width
    if permutation[-1] == len(dimensions) - 1:
        operand_minor = operand_dimensions[-2]
        minor_bytes = byte_width * dimensions[-1]
        if minor_bytes <= MAX_BYTES_IN_MOST_MINOR_DIMENSION and \
                minor_bytes * min(operand_minor, dimensions[-2]) >= MIN_DIMENSION_TO_TRANSPOSE_TILED:
            return dimensions, permutation
        return None
    operand_minor, output_minor = operand_dimensions[-1], dimensions[-1]
    if operand_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED and output_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED:
        return dimensions, permutation
    if (operand_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED_2 and output_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED_2
            and operand_minor * output_minor >= MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED):
        return dimensions, permutation
    return None


def _in_same_computation(instr: HloInstruction, other: HloInstruction) -> bool:
    return other.parent is instr.parent


def _find_single_hero(root: HloInstruction, predicate) -> HloInstruction | None:
    """The one instruction matching ``predicate`` reached from ``root``
    through intermediate ops of up to three operands (consumers first,
    breadth first), from which only intermediate ops are reachable downwards."""
    hero = None
    queue = deque([root])
    seen = {root}
    while queue:
        node = queue.popleft()
        if predicate(node):
            if hero is not None:
                return None  # two candidates: no hero
            hero = node
            continue
        if not is_intermediate(node, 3):
            continue
        for operand in node.operands:
            if _in_same_computation(root, operand) and operand not in seen:
                seen.add(operand)
                queue.append(operand)
    if hero is None:
        return None
    pending, visited = list(hero.users), set()
    while pending:
        user = pending.pop()
        if user in visited or not _in_same_computation(root, user):
            continue
        visited.add(user)
        if user.opcode not in ("tuple", "parameter") and not is_intermediate(user, 3):
            return None
        pending.extend(user.users)
    return hero


def find_non_trivial_hero(instr: HloInstruction) -> HloInstruction:
    """XLA's ``FindNonTrivialHero`` within ``instr``'s computation."""
    hero = instr
    while is_intermediate(hero, 1) and _in_same_computation(instr, hero.operands[0]):
        hero = hero.operands[0]
    transpose = _find_single_hero(hero, lambda node: tiled_transpose(node) is not None)
    if transpose is not None:
        return transpose
    concatenate = _find_single_hero(hero, lambda node: node.opcode == "concatenate")
    if concatenate is not None:
        return concatenate
    return hero if hero.opcode == "reduce" else instr


def fusion_roots(fusion: HloInstruction) -> list[HloInstruction]:
    root = fusion.fused_computation.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def is_real_reduction_hero(hero: HloInstruction) -> bool:
    """A reduce that reduces some dimension of more than one element (one
    over unit dimensions only is a copy in disguise)."""
    if hero.opcode != "reduce":
        return False
    operand = hero.operands[0].shape
    return any(operand.dimensions[d] > 1 for d in hero.attr("dimensions") or ())


def _in_place_dynamic_update_slice(roots: list[HloInstruction]) -> bool:
    """Every root is a dynamic-update-slice (possibly behind bitcasts) updating a fused parameter."""
    for root in roots:
        while root.opcode == "bitcast":
            root = root.operands[0]
        if root.opcode != "dynamic-update-slice" or root.operands[0].opcode != "parameter":
            return False
    return True


def fusion_kind_of(fusion: HloInstruction) -> str:
    """The emitter XLA would pick for ``fusion``: ``"normalization"`` (a row reduce broadcast back into the
    roots: ``normalization_fusion.is_normalization_computation``, XLA:GPU's Triton softmax fusions), ``"reduction"``,
    ``"transpose"``, ``"concatenate"``, ``"dynamic-update-slice"``,
    ``"scatter"`` or ``"loop"`` (``GetEmitterFusionKind``; an in-place
    dynamic-update-slice when every root updates a fused parameter, since
    whether the buffers alias is for buffer assignment to say)."""
    if is_normalization_computation(fusion.fused_computation):
        return "normalization"
    roots = fusion_roots(fusion)
    heroes = [find_non_trivial_hero(r) for r in roots]
    reduction = next((h for h in heroes if is_real_reduction_hero(h)), None)
    if reduction is not None:
        reduced = reduction.operands[0].shape.dimensions
        compatible = True
        for root, hero in zip(roots, heroes):
            if is_real_reduction_hero(hero):
                compatible &= hero.attr("dimensions") == reduction.attr("dimensions") and \
                    hero.operands[0].shape.dimensions == reduced
            else:
                compatible &= _count(root.shape) == _count(reduction.operands[0].shape)
        if compatible:
            return "reduction"
    transposes = [tiled_transpose(h) for h in heroes if h.opcode == "transpose"]
    if transposes and all(t is not None and t == transposes[0] for t in transposes):
        return "transpose"
    if len(roots) > 1:
        return "loop"
    if roots[0].opcode == "scatter":
        return "scatter"
    if _in_place_dynamic_update_slice(roots):
        return "dynamic-update-slice"
    if heroes[0].opcode == "concatenate" and len(heroes[0].operands) <= CONCATENATE_HERO_MAX_OPERANDS:
        return "concatenate"
    return "loop"


def _count(shape: Shape) -> int:
    count = 1
    for d in shape.dimensions:
        count *= d
    return count
