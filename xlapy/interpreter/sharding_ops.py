"""Shardy's ops in a single-device evaluation of the global program.

Annotations (sharding_constraint, reshard, propagation_barrier, data_flow_edge,
sharding_group) pass their operand through; a named computation runs its body.
A manual computation's body sees local shards: each device of the manual
axes gets its block of every operand (per ``in_shardings``), runs the body
(the devices meet at collectives), and the results are put back together per
``out_shardings`` into the global values.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

import numpy as np

import xlapy.sharding.verify  # noqa: F401  (registers its check of manual computations with the HLO verifier)
from xlapy.errors import UnimplementedError, XlapyError
from xlapy.hlo.mlir_structure import op_value, region_result_values
from xlapy.interpreter.registry import rule
from xlapy.interpreter.spmd import DeviceLayout, Meeting, run_devices
from xlapy.shapes import Shape
from xlapy.sharding.mesh import parse_mesh
from xlapy.sharding.tensor_sharding import parse_sharding_per_value_text
from xlapy.syntax import Cursor

# Opcodes that exchange values between devices: a body holding none of them
# runs device after device, without threads.
_COLLECTIVES = frozenset({
    "all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter", "all-to-all",
    "collective-broadcast", "collective-permute", "collective-permute-start", "ragged-all-to-all",
    "stablehlo.all_to_all",
})


@rule("sdy.sharding_constraint", "sdy.reshard", "sdy.propagation_barrier", "sdy.data_flow_edge")
def _annotation(instr, operands, ev):
    return operands[0]


@rule("sdy.sharding_group")
def _sharding_group(instr, operands, ev):
    # Without a result it only ties its operand's sharding to the group's.
    return operands[0] if instr.attributes.get("has_result") else ()


@rule("sdy.named_computation")
def _named_computation(instr, operands, ev):
    body = instr.called_computations[0]
    return op_value(region_result_values(body, ev.call(body, *operands)))


# -- manual_computation ---------------------------------------------------------------------------------


def _mesh(instr, shardings: list):
    meshes = {s.mesh if isinstance(s.mesh, str) else id(s.mesh): s.mesh for s in shardings if s is not None}
    if len(meshes) > 1:
        raise UnimplementedError(f"manual computation {instr.name} uses several meshes")
    if not meshes:
        raise XlapyError(f"manual computation {instr.name} has no shardings to name its mesh")
    mesh = next(iter(meshes.values()))
    if isinstance(mesh, str):
        module_meshes = instr.parent.module.meshes if instr.parent and instr.parent.module else {}
        if mesh not in module_meshes:
            raise XlapyError(f"manual computation {instr.name} uses undeclared mesh @{mesh}")
        mesh = module_meshes[mesh]
    return mesh


def _out_shardings(instr) -> list:
    if not instr.shape.is_tuple:
        return [instr.sdy_sharding]
    shardings: list[Any] = [None] * len(instr.shape.tuple_shapes)
    for user in instr.users:
        if user.opcode == "get-tuple-element" and user.sdy_sharding is not None:
            shardings[user.attributes["index"]] = user.sdy_sharding
    return shardings


class _Blocks:
    """Which block of a global value each device of the manual axes holds."""

    def __init__(self, instr, mesh, manual_axes: tuple[str, ...]):
        self.instr, self.mesh, self.manual = instr, mesh, set(manual_axes)
        names = [a.name for a in mesh.axes]
        unknown = [a for a in manual_axes if a not in names]
        if unknown:
            raise XlapyError(f"manual computation {instr.name}: manual axes {unknown} are not axes of the mesh")
        self.sizes = {a.name: a.size for a in mesh.axes}
        # Devices: every combination of the manual axes' coordinates, the other axes at 0.
        ranges = [range(a.size) if a.name in self.manual else range(1) for a in mesh.axes]
        self.coordinates = [dict(zip(names, c)) for c in itertools.product(*ranges)]
        ids = mesh.device_ids or tuple(range(int(np.prod([a.size for a in mesh.axes], dtype=np.int64))))
        # Collectives in the body name the mesh's devices as partitions.
        self.layout = DeviceLayout(1, max(len(ids), max(ids) + 1))
        self.ids = [ids[int(np.ravel_multi_index(tuple(c.values()), [a.size for a in mesh.axes]))]
                    if mesh.axes else ids[0] for c in self.coordinates]

    def _dims(self, sharding, rank: int, what: str) -> list[list]:
        if sharding is None:
            return [[] for _ in range(rank)]
        if len(sharding.dim_shardings) != rank:
            raise XlapyError(f"manual computation {self.instr.name}: {what} has {len(sharding.dim_shardings)} "
                             f"dimension shardings for rank {rank}")
        if any(a.name in self.manual for a in sharding.unreduced_axes):
            raise UnimplementedError(f"manual computation {self.instr.name}: {what} leaves manual axes unreduced")
        return [[a for a in d.axes if a.name in self.manual] for d in sharding.dim_shardings]

    def _index(self, axes: list, coords: dict) -> tuple[int, int]:
        """(block count, this device's block) along one dimension sharded by ``axes`` (major first)."""
        count, index = 1, 0
        for axis in axes:
            size = axis.size(self.mesh)
            index = index * size + (coords[axis.name] // axis.pre_size) % size
            count *= size
        return count, index

    def local(self, value: np.ndarray, sharding, what: str) -> list[np.ndarray]:
        """``value``'s block on each device."""
        value = np.asarray(value)
        dims = self._dims(sharding, value.ndim, what)
        blocks = []
        for coords in self.coordinates:
            index = []
            for extent, axes in zip(value.shape, dims):
                count, i = self._index(axes, coords)
                if extent % count:
                    raise XlapyError(f"manual computation {self.instr.name}: {what} dimension of size {extent} "
                                     f"does not split into {count} blocks")
                step = extent // count
                index.append(slice(i * step, (i + 1) * step))
            blocks.append(value[tuple(index)])
        return blocks

    def assemble(self, blocks: list[np.ndarray], sharding, shape: Shape, what: str) -> np.ndarray:
        """The global value of ``shape`` the devices' ``blocks`` make (a block
        replicated over axes it is not sharded on is taken from the first device)."""
        dims = self._dims(sharding, len(shape.dimensions), what)
        first = np.asarray(blocks[0])
        result = np.zeros(tuple(shape.dimensions), first.dtype)
        for coords, block in zip(self.coordinates, blocks):
            block = np.asarray(block)
            index = []
            for extent, local, axes in zip(shape.dimensions, block.shape, dims):
                count, i = self._index(axes, coords)
                if local * count != extent:
                    raise XlapyError(f"manual computation {self.instr.name}: {what} has local size {local} on "
                                     f"{count} blocks for global size {extent}")
                index.append(slice(i * local, (i + 1) * local))
            result[tuple(index)] = block
        return result


def _has_collectives(computation, seen: set[int] | None = None) -> bool:
    seen = set() if seen is None else seen
    if id(computation) in seen:
        return False
    seen.add(id(computation))
    for instruction in computation.instructions:
        if instruction.opcode in _COLLECTIVES:
            return True
        if any(_has_collectives(c, seen) for c in instruction.called_computations):
            return True
    return False


def simulate(instr, body, operands: list, ins: list, outs: list, mesh, manual_axes: tuple[str, ...],
             shapes: list[Shape], ev, results_of: Callable[[Any], tuple]) -> list:
    """The global results of running ``body`` on each device of ``manual_axes``
    (operands split per ``ins``, results of global ``shapes`` joined per ``outs``);
    ``results_of`` turns the value of the body into its results."""
    if ev.meeting is not None:
        raise UnimplementedError(f"manual computation {instr.name} inside another manual computation")
    if len(ins) != len(operands):
        raise XlapyError(f"manual computation {instr.name} has {len(operands)} operands and {len(ins)} in_shardings")
    if len(outs) != len(shapes):
        raise XlapyError(f"manual computation {instr.name} has {len(shapes)} results and {len(outs)} out_shardings")
    blocks = _Blocks(instr, mesh, manual_axes)
    per_operand = [blocks.local(v, s, f"operand {i}") for i, (v, s) in enumerate(zip(operands, ins))]
    devices = [(0, i) for i in blocks.ids]
    meeting = Meeting(len(devices)) if len(devices) > 1 and _has_collectives(body) else None
    simulated = frozenset(devices)

    def task(k: int):
        device_ev = ev.for_device(blocks.layout, devices[k], meeting, simulated)
        return lambda: results_of(device_ev.call(body, *[blocks_of[k] for blocks_of in per_operand]))

    per_device = run_devices([task(k) for k in range(len(devices))], meeting)
    return [blocks.assemble([r[j] for r in per_device], outs[j], shape, f"result {j}")
            for j, shape in enumerate(shapes)]


@rule("sdy.manual_computation")
def _manual_computation(instr, operands, ev):
    ins = list(instr.attributes.get("in_shardings", ()))
    outs = _out_shardings(instr)
    shapes = list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]
    body = instr.called_computations[0]
    results = simulate(instr, body, list(operands), ins, outs, _mesh(instr, ins + outs),
                       tuple(instr.attributes.get("manual_axes", ())), shapes, ev,
                       lambda value: region_result_values(body, value))
    return tuple(results) if instr.shape.is_tuple else results[0]


# -- the HLO form JAX exports with Shardy --------------------------------------------------------------
# GlobalToLocalShape(globals) -> call(body) -> LocalToGlobalShape, the shardings and manual
# axes in frontend attributes and the meshes in the module's. The custom calls pass the
# global values through and the call runs the body per device.

GLOBAL_TO_LOCAL, LOCAL_TO_GLOBAL = "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape"


def _target(instr) -> str | None:
    return instr.attributes.get("custom_call_target") if instr.opcode == "custom-call" else None


def _elements_of(instr, values: list) -> bool:
    """Whether ``values`` are ``instr`` itself or its tuple's elements in order."""
    if not instr.shape.is_tuple:
        return values == [instr]
    return len(values) == len(instr.shape.tuple_shapes) and all(
        v.opcode == "get-tuple-element" and v.operands[0] is instr and v.attributes.get("index") == i
        for i, v in enumerate(values))


def _uses(instr) -> list:
    """The users of ``instr``, seen through its tuple's get-tuple-elements."""
    found = []
    for user in instr.users:
        found.extend(user.users if user.opcode == "get-tuple-element" else [user])
    return found


def hlo_manual_call(call):
    """(GlobalToLocalShape, LocalToGlobalShape) around ``call``, or None."""
    if call.opcode != "call" or not call.operands:
        return None
    first = call.operands[0]
    start = first.operands[0] if first.opcode == "get-tuple-element" else first
    if _target(start) != GLOBAL_TO_LOCAL or not _elements_of(start, list(call.operands)):
        return None
    ends = {id(u): u for u in _uses(call) if _target(u) == LOCAL_TO_GLOBAL}
    if len(ends) != 1:
        return None
    end = next(iter(ends.values()))
    if not _elements_of(call, list(end.operands)) or any(u is not end for u in _uses(call)):
        return None
    return start, end


def is_global_side(instr) -> bool:
    """Whether the shape-changing custom call ``instr`` belongs to a manual call
    the interpreter runs per device (so it passes global values through)."""
    if _target(instr) == GLOBAL_TO_LOCAL:
        calls = _uses(instr)
        return bool(calls) and all(hlo_manual_call(c) is not None and hlo_manual_call(c)[0] is instr for c in calls)
    if _target(instr) == LOCAL_TO_GLOBAL and instr.operands:
        first = instr.operands[0]
        call = first.operands[0] if first.opcode == "get-tuple-element" else first
        parts = hlo_manual_call(call)
        return parts is not None and parts[1] is instr
    return False


def _frontend_attributes(text: str) -> dict[str, str]:
    return {name: re.sub(r"\\(.)", r"\1", value)
            for name, value in re.findall(r'([\w.]+)="((?:[^"\\]|\\.)*)"', str(text or ""))}


def _module_meshes(module) -> dict:
    text = str(module.attributes.get("frontend_attributes", ""))
    match = re.search(r'xla\.sdy\.meshes=', text)
    if match is None:
        return {}
    rest = text[match.end():]
    if rest.startswith('"'):
        rest = _frontend_attributes("m" + "=" + rest).get("m", "")
    cursor = Cursor(rest)
    meshes = {}
    cursor.expect("{", "to start the meshes")
    while not cursor.eat("}"):
        name = cursor.match(re.compile(r'"((?:[^"\\]|\\.)*)"|([\w.$-]+)'), "a mesh name")
        cursor.expect("=", "after the mesh name")
        meshes[name.group(1) or name.group(2)] = parse_mesh(cursor)
        cursor.eat(",")
    return meshes


def run_hlo_manual_call(call, operands: list, ev):
    start, end = hlo_manual_call(call)
    ins = parse_sharding_per_value_text(_frontend_attributes(start.attributes.get("frontend_attributes")).get(
        "xla.sdy.in_shardings", "#sdy.sharding_per_value<[]>"))
    end_attributes = _frontend_attributes(end.attributes.get("frontend_attributes"))
    outs = parse_sharding_per_value_text(end_attributes.get("xla.sdy.out_shardings", "#sdy.sharding_per_value<[]>"))
    axes = re.findall(r'"((?:[^"\\]|\\.)*)"', end_attributes.get("xla.sdy.manual_axes", ""))
    meshes = _module_meshes(call.parent.module)
    names = {s.mesh for s in ins + outs if isinstance(s.mesh, str)}
    if names - meshes.keys():
        raise XlapyError(f"manual computation {call.name} uses meshes {sorted(names - meshes.keys())} the module's "
                         "xla.sdy.meshes does not declare")
    inline = [s.mesh for s in ins + outs if not isinstance(s.mesh, str)]
    mesh = meshes[next(iter(names))] if names else (inline[0] if inline else None)
    if mesh is None:
        raise XlapyError(f"manual computation {call.name} has no shardings to name its mesh")
    shapes = list(end.shape.tuple_shapes) if end.shape.is_tuple else [end.shape]
    # An HLO call has one value: its results are the elements of a tuple.
    results = simulate(call, call.called_computations[0], operands, ins, outs, mesh, tuple(axes), shapes, ev,
                       lambda value: tuple(value) if call.shape.is_tuple else (value,))
    return tuple(results) if call.shape.is_tuple else results[0]
