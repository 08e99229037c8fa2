"""Several devices of one SPMD program evaluated together: which devices a
collective's groups make a device exchange values with, and the meeting point
where simulated devices (one thread each) hand each other those values.

A device is ``(replica, partition)``; its global id is
``replica * num_partitions + partition``. The groups follow XLA's modes: without
a channel id the groups list replicas (of the device's own partition); with one
they list replicas, each taken with every partition; with
``use_global_device_ids`` they list global ids.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xlapy.errors import UnimplementedError, XlapyError
from xlapy.hlo.replica_groups import MAX_DEVICES, parse_replica_groups
from xlapy.syntax import read_int

if TYPE_CHECKING:
    from xlapy.hlo import HloInstruction, HloModule

Device = tuple[int, int]  # (replica, partition)


@dataclass(frozen=True)
class DeviceLayout:
    """How many replicas and partitions the program runs on."""

    replica_count: int = 1
    num_partitions: int = 1

    @staticmethod
    def of(module: HloModule) -> DeviceLayout:
        """The module's replica_count/num_partitions (HLO header or the MLIR
        module's ``mhlo.num_replicas``/``mhlo.num_partitions``), 1 when absent."""
        return DeviceLayout(_module_count(module, "replica_count"), _module_count(module, "num_partitions"))

    def describe(self) -> str:
        return f"replica_count={self.replica_count}, num_partitions={self.num_partitions}"

    def global_id(self, device: Device) -> int:
        return device[0] * self.num_partitions + device[1]

    def device_of(self, global_id: int) -> Device:
        return divmod(global_id, self.num_partitions)


_INT64_MAX = (1 << 63) - 1


def _module_count(module: HloModule, hlo_name: str) -> int:
    # The StableHLO frontend sets these from the MLIR module's mhlo.num_replicas / mhlo.num_partitions.
    text = module.attributes.get(hlo_name)
    if text is None:
        return 1
    text = str(text).strip()
    try:
        return read_int(text, 1, _INT64_MAX)
    except XlapyError as e:
        raise XlapyError(f"module {module.name}: {hlo_name}={text[:40]} is not a device count: {e}") from None


def parse_groups(text: Any) -> list[list[int]]:
    """``replica_groups`` as lists of ids (see ``xlapy.hlo.replica_groups``);
    ``{}`` (every device in one group) is []."""
    return parse_replica_groups(text).groups()


def _every(count: int, what: str, instr: HloInstruction, layout: DeviceLayout, listed: bool = True) -> list[int]:
    """``range(count)`` as a list (when ``listed``), for a group of every
    replica, partition or device; refused beyond ``MAX_DEVICES``."""
    if count > MAX_DEVICES:
        raise UnimplementedError(f"{instr.opcode} {instr.name}: a group of all {count} {what} ({layout.describe()}) "
                                 f"is more than the {MAX_DEVICES} devices the interpreter handles")
    return list(range(count)) if listed else []


# Collectives with a use_global_device_ids attribute (false when absent); with a
# channel id the others (all-to-all, collective-broadcast) work across partitions.
_WITH_GLOBAL_IDS = frozenset({"all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter"})


def participants(instr: HloInstruction, layout: DeviceLayout, device: Device) -> list[Device]:
    """The devices, in group order, that ``device`` meets at the collective ``instr``."""
    try:
        groups = parse_groups(instr.attributes.get("replica_groups"))
    except XlapyError as e:
        raise XlapyError(f"{instr.opcode} {instr.name}: {e}") from None
    replica, partition = device
    if instr.attributes.get("use_global_device_ids"):
        count = layout.replica_count * layout.num_partitions
        ids = _group_of(groups or [_every(count, "devices", instr, layout)], layout.global_id(device), count,
                        instr, layout)
        return [layout.device_of(i) for i in ids]
    if instr.attributes.get("channel_id") is None:
        replicas = _group_of(groups or [_every(layout.replica_count, "replicas", instr, layout)], replica,
                             layout.replica_count, instr, layout)
        return [(r, partition) for r in replicas]
    if instr.opcode not in _WITH_GLOBAL_IDS:
        partitions = _group_of(groups or [_every(layout.num_partitions, "partitions", instr, layout)], partition,
                               layout.num_partitions, instr, layout)
        return [(replica, p) for p in partitions]
    replicas = _group_of(groups or [_every(layout.replica_count, "replicas", instr, layout)], replica,
                         layout.replica_count, instr, layout)
    _every(len(replicas) * layout.num_partitions, "devices of its replicas", instr, layout, listed=False)
    return [(r, p) for r in replicas for p in range(layout.num_partitions)]


def _group_of(groups: list[list[int]], member: int, count: int, instr: HloInstruction,
              layout: DeviceLayout) -> list[int]:
    """The group holding ``member``; every id must be below ``count``."""
    found = None
    for group in groups:
        if any(not 0 <= i < count for i in group):
            raise XlapyError(f"{instr.opcode} {instr.name}: replica_groups={instr.attributes.get('replica_groups')} "
                             f"name a device outside the {count} there are ({layout.describe()})")
        if member in group and found is None:
            found = group
    if found is None:
        raise XlapyError(f"{instr.opcode} {instr.name}: no group of replica_groups="
                         f"{instr.attributes.get('replica_groups')} holds device {member} ({layout.describe()})")
    return found


def permute_peers(instr: HloInstruction, layout: DeviceLayout, device: Device) -> tuple[list[Device], Device | None]:
    """The devices a collective-permute runs on together with ``device``
    (partitions of its replica with a channel id, replicas of its partition
    without), and the device ``device`` receives from (None: it gets zeros)."""
    replica, partition = device
    cross_partition = instr.attributes.get("channel_id") is not None
    me = partition if cross_partition else replica
    count = layout.num_partitions if cross_partition else layout.replica_count
    every = _every(count, "partitions" if cross_partition else "replicas", instr, layout)
    peers = [(replica, p) for p in every] if cross_partition else [(r, partition) for r in every]
    pairs = [(read_int(str(s), 0, _INT64_MAX), read_int(str(t), 0, _INT64_MAX))
             for s, t in instr.attributes.get("source_target_pairs", ())]
    sources = [s for s, t in pairs if t == me]
    if len(sources) > 1:
        raise XlapyError(f"collective-permute {instr.name}: device {me} receives from {sources}")
    if not sources:
        return peers, None
    source = sources[0]
    return peers, ((replica, source) if cross_partition else (source, partition))


class Meeting:
    """Where the threads of simulated devices exchange a collective's values.

    ``exchange`` blocks until every participant has brought its value. When
    every device still running waits for a partner that will never come (the
    devices took different paths) or a device failed, the waiting ones raise
    instead of hanging."""

    def __init__(self, devices: int):
        self._lock = threading.Condition()
        self._running = devices
        self._pending: dict[Any, dict[Device, Any]] = {}
        self._done: dict[Any, list[Any]] = {}
        self._unread: dict[Any, int] = {}
        self.failure: BaseException | None = None

    def exchange(self, key: Any, group: Sequence[Device], me: Device, value: Any, what: str) -> list[Any]:
        """The values the devices of ``group`` bring to ``key``, in group order."""
        with self._lock:
            if self.failure is not None:
                raise _Abandoned()
            slot = self._pending.setdefault(key, {})
            slot[me] = value
            if len(slot) == len(group):
                del self._pending[key]
                self._done[key] = [slot[d] for d in group]
                self._unread[key] = len(group)
                self._running += len(group) - 1  # the waiting participants run again
                self._lock.notify_all()
            else:
                self._running -= 1
                self._check_stuck(what)
                while key not in self._done and self.failure is None:
                    self._lock.wait()
                if key not in self._done:
                    raise _Abandoned()
            values = self._done[key]
            self._unread[key] -= 1
            if not self._unread[key]:
                del self._done[key], self._unread[key]
            return values

    def finished(self, error: BaseException | None) -> None:
        """A device's thread ends (with ``error`` if it failed)."""
        with self._lock:
            self._running -= 1
            if error is not None and self.failure is None:
                self.failure = error
                self._lock.notify_all()
            self._check_stuck("the end of the computation")

    def _check_stuck(self, what: str) -> None:
        if self._running == 0 and self._pending and self.failure is None:
            waiting = sorted({str(d) for slot in self._pending.values() for d in slot})
            self.failure = XlapyError(f"the simulated devices do not meet: {', '.join(waiting)} wait at a collective "
                                      f"that other devices never reach (last reached: {what})")
            self._lock.notify_all()


class _Abandoned(Exception):
    """A device gives up waiting because another failed."""


def run_devices(tasks: Sequence[Callable[[], Any]], meeting: Meeting | None) -> list[Any]:
    """The results of ``tasks`` (one per simulated device). With a ``meeting``
    each runs in its own thread (they meet there at collectives), else one
    after the other; the first error any device raises is raised."""
    if meeting is None:
        return [task() for task in tasks]
    results: list[Any] = [None] * len(tasks)

    def run(index: int) -> None:
        error = None
        try:
            results[index] = tasks[index]()
        except BaseException as e:
            error = e
        finally:
            meeting.finished(None if isinstance(error, _Abandoned) else error)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(tasks))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if meeting.failure is not None:
        raise meeting.failure
    return results


def unsupported(instr: HloInstruction, layout: DeviceLayout, group: Sequence[Device], why: str) -> XlapyError:
    shown = ", ".join(map(str, group[:8])) + (f", ... ({len(group)} devices)" if len(group) > 8 else "")
    return UnimplementedError(
        f"{instr.opcode} {instr.name} with replica_groups={instr.attributes.get('replica_groups', '{}')} "
        f"exchanges values between devices (replica, partition) {shown} ({layout.describe()}): {why}")
