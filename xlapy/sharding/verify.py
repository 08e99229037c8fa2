"""Validity checks for Shardy meshes, tensor shardings and manual computations.

The rules and their wording follow Shardy's verifiers, so that a message found in
Shardy's documentation or tests is a substring of ours; every message starts with
where the sharding is (a function argument, an op result, ...) and ends with the
offending sharding printed in Shardy syntax. The manual computation invariants are
numbered as in the Shardy compiler API documentation:

1. all in/out shardings and ``manual_axes`` refer to the same mesh, ``manual_axes``
   sorted w.r.t. that mesh;
2. every manual axis is used explicitly (as a full axis) in every in/out sharding.
   By default (``implicit_manual_replication=True``) a manual axis a sharding does
   not mention is replicated, as Shardy and JAX's ``shard_map`` treat it (JAX prints
   all of a shard_map's manual axes, even those its in/out specs leave out);
   ``implicit_manual_replication=False`` enforces the invariant as written;
3. in every dimension sharding, free axes are minor to every manual axis;
4. the body is local: its parameters and returned values have the global types
   divided along the manual axes. Nested manual computations use disjoint manual axes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from xlapy.errors import VerifyError
from xlapy.hlo import HloComputation, HloInstruction
from xlapy.hlo.mlir_structure import encodes_mlir_structure, op_results, region_results, source_of
from xlapy.hlo.shape_rules.registry import op_check
from xlapy.shapes import Shape
from xlapy.sharding.axis_ref import AxisRef, is_sorted_by_mesh
from xlapy.sharding.mesh import Mesh, quote
from xlapy.sharding.tensor_sharding import TensorSharding

MANUAL_COMPUTATION = "sdy.manual_computation"
# Ops whose called computations are functions (symbols), not regions nested in the op.
_FUNCTION_CALLERS = frozenset({"call", "custom-call"})


def _fail(where: str, message: str, sharding: TensorSharding | None = None) -> VerifyError:
    text = f"{where}: {message}" if where else message
    if sharding is not None:
        text += f" in sharding {sharding.body()}"
    return VerifyError(text)


# -- meshes ------------------------------------------------------------------------

def verify_mesh(mesh: Mesh, where: str = "sdy.mesh") -> None:
    """Axis sizes are positive, names unique; explicit device ids are a non-identity
    permutation of ``0..n-1`` (or the single id of a maximal mesh)."""
    seen: set[str] = set()
    for axis in mesh.axes:
        if axis.size <= 0:
            raise _fail(where, f"axis size must be at least 1, got: {axis.size}")
        if axis.name in seen:
            raise _fail(where, f"duplicate axis name: {quote(axis.name)}")
        seen.add(axis.name)
    ids = mesh.device_ids
    if not ids:
        return
    for device_id in ids:
        if device_id < 0:
            raise _fail(where, f"device id must be non-negative, got: {device_id}")
    if not mesh.axes and len(ids) > 1:
        raise _fail(where, "axes is empty and device_ids has more than one element")
    if mesh.total_size != len(ids):
        raise _fail(where, "total product of axis sizes must match total number of device ids, "
                           f"got: {mesh.total_size} != {len(ids)}")
    if not mesh.axes:
        return
    if sorted(ids) != list(range(len(ids))):
        raise _fail(where, "sorted device ids must be iota(product(axes)), got: "
                           + ", ".join(str(i) for i in sorted(ids)))
    if list(ids) == sorted(ids):
        raise _fail(where, "if the ordered device ids are the same as iota(product(axes)), "
                           "no need to specify them for simplicity")


# -- tensor shardings ------------------------------------------------------------------

def _is_dynamic(size: int) -> bool:
    return size < 0


def verify_tensor_sharding(sharding: TensorSharding, dims: Sequence[int] | None, meshes: Mapping[str, Mesh],
                           where: str, bound_manual_axes: Iterable[str] = (),
                           check_divisibility: bool = False) -> None:
    """Check ``sharding`` for a value with dimension sizes ``dims`` (None: a value that is
    not a tensor, e.g. a token; negative sizes are dynamic).

    ``bound_manual_axes`` are the manual axes of the enclosing manual computations, which
    a sharding inside them may not use. Like Shardy, dimensions need not be divisible by
    their sharded size unless ``check_divisibility``."""
    mesh = _resolve_mesh(sharding, meshes, where)
    if mesh.is_maximal:
        if sharding.rank or sharding.replicated_axes or sharding.unreduced_axes:
            raise _fail(where, "a maximal sharding can only have a sharding with rank 0 and no replicated or "
                               "unreduced axes", sharding)
        return
    if dims is None:
        if sharding.rank or sharding.replicated_axes or sharding.unreduced_axes:
            raise _fail(where, "non-shaped tensors can only have a sharding with rank 0 and no replicated or "
                               "unreduced axes", sharding)
        return
    if sharding.rank != len(dims):
        raise _fail(where, f"sharding doesn't match tensor rank: {sharding.rank} != {len(dims)}", sharding)

    seen: set[AxisRef] = set()
    sub_axes: dict[str, list[AxisRef]] = {}
    for dim, (dim_sharding, size) in enumerate(zip(sharding.dim_shardings, dims)):
        if dim_sharding.priority is not None:
            if dim_sharding.priority < 0:
                raise _fail(where, f"dim {dim} has a negative priority", sharding)
            if dim_sharding.is_closed and not dim_sharding.axes:
                raise _fail(where, f"dim {dim} is empty and closed but has a priority", sharding)
        _verify_axis_list(dim_sharding.axes, mesh, seen, sub_axes, where, sharding)
        if check_divisibility and not _is_dynamic(size):
            sharded = dim_sharding.sharded_size(mesh)
            if size % sharded:
                raise _fail(where, f"dim {dim} with size {size} is not divisible by its sharded size {sharded}",
                            sharding)

    for kind, axes in (("replicated", sharding.replicated_axes), ("unreduced", sharding.unreduced_axes)):
        _verify_known_axes(axes, mesh, where, sharding)
        if not is_sorted_by_mesh(axes, mesh):
            raise _fail(where, f"{kind} axes are not ordered w.r.t. mesh", sharding)
        _verify_axis_list(axes, mesh, seen, sub_axes, where, sharding)

    for name, refs in sub_axes.items():
        _verify_sub_axes(sorted(refs, key=lambda ref: ref.sort_key(mesh)), name, mesh, seen, where, sharding)

    bound = set(bound_manual_axes)
    for ref in sharding.axis_refs():
        if ref.name in bound:
            raise _fail(where, f"operates on axis {quote(ref.name)} which is already bound by a parent "
                               f"{MANUAL_COMPUTATION} op", sharding)


def _resolve_mesh(sharding: TensorSharding, meshes: Mapping[str, Mesh], where: str) -> Mesh:
    if isinstance(sharding.mesh, Mesh):
        return sharding.mesh
    if sharding.mesh not in meshes:
        raise _fail(where, f"unknown mesh: @{sharding.mesh}", sharding)
    return meshes[sharding.mesh]


def _verify_known_axes(axes: Iterable[AxisRef], mesh: Mesh, where: str, sharding: TensorSharding) -> None:
    for ref in axes:
        if not mesh.has_axis(ref.name):
            raise _fail(where, f"unknown axis name: {quote(ref.name)}", sharding)


def _verify_axis_list(axes: Sequence[AxisRef], mesh: Mesh, seen: set[AxisRef], sub_axes: dict[str, list[AxisRef]],
                      where: str, sharding: TensorSharding) -> None:
    """Known axes, no axis ref used twice, no two adjacent sub-axes that should be one."""
    previous: AxisRef | None = None
    for ref in axes:
        if not mesh.has_axis(ref.name):
            raise _fail(where, f"unknown axis name: {quote(ref.name)}", sharding)
        if ref in seen:
            raise _fail(where, f"duplicate axis ref: {ref}", sharding)
        seen.add(ref)
        if ref.sub_axis is not None:
            sub_axes.setdefault(ref.name, []).append(ref)
            if previous is not None and previous.can_merge(ref):
                raise _fail(where, f"two consecutive sub-axes can be merged: {previous}, {ref}", sharding)
        previous = ref


def _verify_sub_axes(refs: Sequence[AxisRef], name: str, mesh: Mesh, seen: set[AxisRef], where: str,
                     sharding: TensorSharding) -> None:
    """Each sub-axis is a valid piece of its axis, and no two of them overlap."""
    if refs and AxisRef(name) in seen:
        raise _fail(where, f"both sub-axis and full-axis are used for axis name: {quote(name)}", sharding)
    axis_size = mesh.axis_size(name)
    previous: AxisRef | None = None
    for ref in refs:
        pre_size, size = ref.sub_axis
        if pre_size < 1:
            raise _fail(where, f"sub-axis pre-size must be at least 1: {ref}", sharding)
        if size <= 1:
            raise _fail(where, f"sub-axis sizes must be greater than 1: {ref}", sharding)
        if axis_size % (pre_size * size):
            raise _fail(where, f"sub-axis next pre-size {pre_size * size} doesn't divide the size of the full "
                               f"axis {axis_size}: {ref}", sharding)
        if size == axis_size:
            raise _fail(where, f"sub-axis size is equal to the full axis size: {ref}", sharding)
        if previous is not None and previous.pre_size * previous.sub_axis[1] > pre_size:
            raise _fail(where, f"overlapping sub-axes: {previous}, {ref}", sharding)
        previous = ref


def _dims_of(shape: Shape) -> tuple[int, ...] | None:
    """The dimension sizes Shardy sees for a value of ``shape`` (None if not a tensor)."""
    if shape.is_tuple:
        if len(shape.tuple_shapes) != 1:
            return None
        shape = shape.tuple_shapes[0]
    if not shape.is_array:
        return None
    return tuple(shape.dimensions)


def verify_value_sharding(sharding: TensorSharding, shape: Shape, meshes: Mapping[str, Mesh], where: str,
                          bound_manual_axes: Iterable[str] = ()) -> None:
    """``verify_tensor_sharding`` for a value of the given HLO shape."""
    if shape.is_tuple and len(shape.tuple_shapes) > 1:
        raise _fail(where, f"ops can only have a sharding for a tuple of size 1: {shape}", sharding)
    verify_tensor_sharding(sharding, _dims_of(shape), meshes, where, bound_manual_axes)


# -- manual computations -----------------------------------------------------------

def describe(instr: HloInstruction) -> str:
    """How messages name an op: as MLIR wrote it (``stablehlo.add %3``) when it came
    from MLIR, else by HLO opcode and name."""
    written = None if encodes_mlir_structure(instr) else source_of(instr).describe()
    return written or f"{instr.opcode} {instr.name}"


def _same_dims(a: Shape, b: Shape) -> bool:
    return (a.element_type == b.element_type and tuple(a.dimensions) == tuple(b.dimensions)
            and tuple(a.dynamic_dimensions) == tuple(b.dynamic_dimensions))


def _local_shape(global_shape: Shape, sharding: TensorSharding, manual: set[str], mesh: Mesh, where: str,
                 label: str) -> Shape:
    dims = []
    for size, dim in zip(global_shape.dimensions, sharding.dim_shardings):
        if _is_dynamic(size):
            dims.append(size)
            continue
        factor = 1
        for ref in dim.axes:
            if ref.name in manual:
                factor *= ref.size(mesh)
        if size % factor:
            raise _fail(where, f"invariant 4: {label}: dimension size {size} is not divisible by the manual axes "
                               f"size {factor}", sharding)
        dims.append(size // factor)
    return Shape(global_shape.element_type, tuple(dims), dynamic_dimensions=global_shape.dynamic_dimensions)


def verify_manual_computation(instr: HloInstruction, meshes: Mapping[str, Mesh], where: str | None = None,
                              bound_manual_axes: Iterable[str] = (), implicit_manual_replication: bool = True) -> None:
    """Check an ``sdy.manual_computation`` against the invariants of the module docstring
    (and Shardy's other checks of the op). ``bound_manual_axes``: manual axes of the
    enclosing manual computations; ``implicit_manual_replication``: relax invariant 2
    (the default; False checks it strictly)."""
    where = where or describe(instr)
    manual_axes = instr.attributes.get("manual_axes", ())
    in_shardings = instr.attributes.get("in_shardings", ())
    # Attributes of the wrong kind (an IR built or edited by hand) are errors too.
    if not isinstance(manual_axes, (tuple, list)) or not all(isinstance(a, str) for a in manual_axes):
        raise _fail(where, f"manual_axes must be a list of axis names, got {manual_axes!r}")
    if not isinstance(in_shardings, (tuple, list)) or not all(isinstance(s, TensorSharding) for s in in_shardings):
        raise _fail(where, f"in_shardings must be a list of shardings, got {in_shardings!r}")
    manual_axes, in_shardings = tuple(manual_axes), tuple(in_shardings)
    results = op_results(instr)
    out_shardings = tuple(result.sdy_sharding for result in results)
    for index, sharding in enumerate(out_shardings):
        if sharding is not None and not isinstance(sharding, TensorSharding):
            raise _fail(where, f"out sharding {index} must be a sharding, got {sharding!r}")
    bound = set(bound_manual_axes)

    for axis in manual_axes:
        if axis in bound:
            raise _fail(where, f"operates on axis {quote(axis)} which is already bound by a parent "
                               f"{MANUAL_COMPUTATION} op (nested manual computations must use disjoint manual axes)")
    if not instr.called_computations:
        raise _fail(where, "has no body")
    body = instr.called_computations[0]

    if len(in_shardings) != len(instr.operands):
        raise _fail(where, f"operand shardings don't match number of values: {len(in_shardings)} shardings vs "
                           f"{len(instr.operands)} values")
    for index, sharding in enumerate(out_shardings):
        if sharding is None:
            raise _fail(where, f"result {index} has no out sharding")

    values = [("in_shardings", i, s, operand.shape) for i, (s, operand) in enumerate(zip(in_shardings, instr.operands))]
    values += [("out_shardings", i, s, result.shape) for i, (s, result) in enumerate(zip(out_shardings, results))]
    for kind, index, sharding, shape in values:
        verify_value_sharding(sharding, shape, meshes, f"{where} {kind}[{index}]", bound)

    if not values:
        if manual_axes and any(not encodes_mlir_structure(i) and i.opcode != "parameter" for i in body.instructions):
            raise _fail(where, "cannot have manual_axes when there are no in/out shardings and the body is not empty")
        return

    # Invariant 1: one mesh (empty meshes aside), manual axes of that mesh, sorted.
    mesh: Mesh | None = None
    first: TensorSharding | None = None
    for _, _, sharding, _ in values:
        candidate = sharding.mesh_of(meshes)
        if candidate.is_empty:
            continue
        if mesh is None:
            mesh, first = candidate, sharding
        elif candidate != mesh:
            raise _fail(where, "invariant 1: all in and out shardings must be bound to the same mesh or an empty "
                               f"mesh, got {first.body()} and {sharding.body()}")
    axes_text = "{" + ", ".join(quote(a) for a in manual_axes) + "}"
    if mesh is None:
        if manual_axes:
            raise _fail(where, f"invariant 1: manual_axes {axes_text} but the in/out shardings have no mesh axes")
        return
    for axis in manual_axes:
        if not mesh.has_axis(axis):
            raise _fail(where, f"invariant 1: unknown manual axis: {quote(axis)} (mesh {mesh})")
    positions = [mesh.axis_index(axis) for axis in manual_axes]
    if any(positions[i] >= positions[i + 1] for i in range(len(positions) - 1)):
        raise _fail(where, f"invariant 1: manual_axes {axes_text} must be sorted w.r.t. the mesh {mesh} "
                           "and unique")

    manual = set(manual_axes)
    for kind, index, sharding, _ in values:
        label = f"{kind}[{index}] {sharding.body()}"
        # Invariant 2: every manual axis shards a dimension or is replicated, as a full axis.
        for ref in sharding.axis_refs():
            if ref.name in manual and ref.sub_axis is not None:
                raise _fail(where, f"invariant 2: {label} cannot use a manual axis as a sub/split axis: {ref}")
        used = {ref.name for ref in sharding.sharding_axis_refs()} | {ref.name for ref in sharding.replicated_axes}
        for axis in manual_axes:
            if axis not in used and not implicit_manual_replication:
                raise _fail(where, f"invariant 2: manual axis {quote(axis)} must shard a dimension or be replicated "
                                   f"in {label} (the strict check of --strict-manual-axes; Shardy and JAX's "
                                   "shard_map take an unmentioned manual axis as replicated, as xlapy does by "
                                   "default)")
        # Invariant 3: in each dimension sharding, manual axes come first.
        for dim, dim_sharding in enumerate(sharding.dim_shardings):
            free: AxisRef | None = None
            for ref in dim_sharding.axes:
                if ref.name not in manual:
                    free = free or ref
                elif free is not None:
                    raise _fail(where, f"invariant 3: free axis {free} must be minor to manual axis {ref} in "
                                       f"dimension {dim} of {label}")

    # Invariant 4: the body sees the local types.
    params = body.parameters
    returned = region_results(body)
    for kind, count, body_count, noun in (("operand", len(instr.operands), len(params), "parameters"),
                                          ("result", len(results), len(returned), "returned values")):
        if count != body_count:
            raise _fail(where, f"invariant 4: number of op {kind}s and body {noun} must match: {count} op {kind}s "
                               f"and {body_count} body {noun}")
    checks = [(f"in_shardings[{i}]", s, op.shape, p.shape, f"body parameter {i}")
              for i, (s, op, p) in enumerate(zip(in_shardings, instr.operands, params))]
    checks += [(f"out_shardings[{i}]", s, r.shape, v.shape, f"body returned value {i}")
               for i, (s, r, v) in enumerate(zip(out_shardings, results, returned))]
    for label, sharding, global_shape, local_shape, body_value in checks:
        if not global_shape.is_array:
            continue
        expected = _local_shape(global_shape, sharding, manual, mesh, where, label)
        if not _same_dims(expected, local_shape):
            raise _fail(where, f"invariant 4: {body_value} has shape {local_shape.to_string(False)} but the global "
                               f"shape {global_shape.to_string(False)} with {label} {sharding.body()} has local "
                               f"shape {expected.to_string(False)}")


# -- modules -----------------------------------------------------------------------

def _region_computations(module) -> set[int]:
    """Computations that are regions of an op (rather than functions)."""
    regions: set[int] = set()
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.opcode not in _FUNCTION_CALLERS:
                regions.update(id(called) for called in instr.called_computations)
    return regions


def verify_module(module, implicit_manual_replication: bool = True) -> None:
    """Check every mesh and every sharding of a module imported from StableHLO.
    ``implicit_manual_replication`` relaxes invariant 2 (the default; see the module docstring)."""
    meshes: Mapping[str, Mesh] = module.meshes
    for name, mesh in meshes.items():
        verify_mesh(mesh, f"sdy.mesh @{name}")
    regions = _region_computations(module)
    for computation in module.computations:
        if id(computation) in regions:
            continue
        where = f"func @{computation.name}"
        for param in computation.parameters:
            if param.sdy_sharding is not None:
                verify_value_sharding(param.sdy_sharding, param.shape, meshes,
                                      f"{where} arg {param.parameter_number}")
        returned = region_results(computation)
        shardings = list(computation.result_shardings or [])
        if any(s is not None for s in shardings) and len(shardings) != len(returned):
            raise _fail(where, f"result shardings don't match number of results: {len(shardings)} shardings vs "
                               f"{len(returned)} results")
        for index, (sharding, value) in enumerate(zip(shardings, returned)):
            if sharding is not None:
                verify_value_sharding(sharding, value.shape, meshes, f"{where} result {index}")
        _verify_body(computation, meshes, where, (), False, implicit_manual_replication)


def _verify_body(computation: HloComputation, meshes: Mapping[str, Mesh], func_where: str,
                 bound: tuple[str, ...], is_region: bool, implicit_manual_replication: bool) -> None:
    for instr in computation.instructions:
        if instr.opcode == "parameter":
            # Function arguments were checked by the caller; block arguments carry no sharding in Shardy.
            if is_region and instr.sdy_sharding is not None:
                verify_value_sharding(instr.sdy_sharding, instr.shape, meshes,
                                      f"{func_where} {describe(instr)}", bound)
            continue
        where = f"{func_where} {describe(instr)}"
        if instr.opcode == MANUAL_COMPUTATION:
            verify_manual_computation(instr, meshes, where, bound, implicit_manual_replication)
            body = instr.called_computations[0]
            _verify_body(body, meshes, func_where, bound + tuple(instr.attributes.get("manual_axes", ())), True,
                         implicit_manual_replication)
            continue
        if _is_result_of(instr, MANUAL_COMPUTATION):
            continue  # its out sharding was checked with the manual computation
        if encodes_mlir_structure(instr) and instr.opcode == "tuple":
            continue
        _verify_op_shardings(instr, meshes, where, bound)
        if instr.opcode not in _FUNCTION_CALLERS:
            for region in instr.called_computations:
                _verify_body(region, meshes, func_where, bound, True, implicit_manual_replication)


def _is_result_of(instr: HloInstruction, opcode: str) -> bool:
    return (instr.opcode == "get-tuple-element" and encodes_mlir_structure(instr) and bool(instr.operands)
            and instr.operands[0].opcode == opcode)


def _verify_op_shardings(instr: HloInstruction, meshes: Mapping[str, Mesh], where: str,
                         bound: tuple[str, ...]) -> None:
    if instr.opcode == "get-tuple-element" and encodes_mlir_structure(instr):
        return  # checked with the op that defines it
    results = op_results(instr)
    if instr.shape.is_tuple and not results:
        # No results (or a single tuple value): the sharding, if any, describes the op itself.
        if instr.sdy_sharding is not None:
            verify_value_sharding(instr.sdy_sharding, instr.shape, meshes, f"{where} result", bound)
        return
    shardings = [(index, result.sdy_sharding, result.shape) for index, result in enumerate(results)
                 if result.sdy_sharding is not None]
    for index, sharding, shape in shardings:
        label = "result" if len(results) == 1 else f"result {index}"
        verify_value_sharding(sharding, shape, meshes, f"{where} {label}", bound)
    named = [s for _, s, _ in shardings if not s.mesh_of(meshes).is_empty]
    if any(s.mesh_of(meshes) != named[0].mesh_of(meshes) for s in named[1:]):
        raise _fail(where, "result shardings can only be bound to the same mesh or an empty mesh: "
                    + ", ".join(s.body() for _, s, _ in shardings))


@op_check(MANUAL_COMPUTATION)
def _check_manual_computation(instr: HloInstruction) -> None:
    # The HLO verifier's check of the op, once this module is loaded (the
    # StableHLO import and the interpreter load it): its shardings against its mesh.
    module = instr.parent.module if instr.parent is not None else None
    verify_manual_computation(instr, module.meshes if module is not None else {}, "its shardings")
