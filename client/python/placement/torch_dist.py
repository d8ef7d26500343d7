"""Runs a placed training plan (api.md section 2.1) across processes on torch.distributed.

    # in every process of a torch.distributed job of K x D processes (torchrun's conventions; see
    # `python3 -m placement.torch_run --help` for a launcher that starts them):
    traced = torch_run.trace(model, microbatch_inputs, loss_fn, "adam", microbatch_targets, microbatches=M)
    step = torch_dist.DistributedStep(traced, request, placement)   # collective: every rank builds it
    loss = step.run(inputs, targets)        # the whole batch of all replicas; each process takes its part
    step.gather_state()                     # {"param": {...}, "state": [...], "buffer": {...}} on rank 0

One OS process per device: process g * K + d runs device d of replica group g (K = devices of a group,
D = data_parallel). Each process holds the parameters, optimizer state and buffers of its ops and nothing
else, runs its instances (op, microbatch) in the order the simulator starts them
(placement.plan_schedule, api.md's priorities), and exchanges what crosses devices by point-to-point
messages that follow the simulator's transfers: one per producer instance and destination device (a
per-microbatch op's copy, a once op's output, an accumulated gradient), sent the moment its producer
finishes. A gradient producer (a per-microbatch op feeding a once op, api.md) sums its copies on its own
device; with D > 1 the sum is all-reduced (averaged) over the ring of the D processes that run that
device in each replica group, in the simulator's ring order, before its once consumers read it (where
the ring's processes share a CPU host, through shared memory: each writes its part once and sums its
slice of every part, in ring order, into one result all read in place, so the replicas hold the same
bits; a result that an op of the step writes in place is copied first; placement.shm_channel.SameHostRing). With
a window W < M a process starts microbatch m only after every device of its group has finished
microbatch m - W (each sends the others a token when it has).

Messages: the payload of a transfer is the tensors its destination reads from the producer (views
included), packed into one byte buffer at the producer's finish (a copy: an in-place write after the
send cannot reach it). Between two CPU processes of one host (gloo's backend) the buffer is memory the
receiver maps (placement.shm_channel: the sender packs into it and writes the message's number to a
pipe; the receiver reads the tensors in place), which costs one copy on the sender's thread where
gloo's loopback socket costs two more and keeps its own threads busy on both sides (the measured step
0.89-0.95 x gloo's in geomean on this 2-core machine: bench/torch_run/README.md); `transport="gloo"`,
or a host without a writable /dev/shm with room for a step's messages, keeps gloo. Every message carries
a tag of its own. With gloo, which matches a receive to
its send by tag, every receive is posted when the step starts and every send as soon as its payload is
packed, from the computing thread (no second Python thread contends for the interpreter: at K = 2 this
halved the time a ResNet-18 step spent waiting for messages). With NCCL (or `ordered=True`), every pair
of processes posts its messages in one order, the order in which the simulation sent them, from one
communication thread per process: that is what NCCL's point-to-point calls need to match, and since the
simulation is a valid schedule the run cannot deadlock (tested on gloo with `ordered=True`). A transfer whose consumers read nothing (a control edge) is a one-
word message, kept so that the order of in-place writes holds across devices.

In-place writes: a local read sees the live tensor (the traced program's order of writes and earlier
reads on one device is kept: the schedule gets a zero-cost edge from such a read to the write); a read
on another device gets the version it needs from the op that made it, which the exporter connects to
the reader. A write to storage that lives on another device is refused, as in PlacedStep.

Numerics: the step equals the unplaced step over the whole batch of D x batch samples (tests: 2 and 4
processes, SGD and Adam, a CNN and a transformer, M = 1 and 4, D = 1 and 2) up to float32 rounding,
since sums are taken in another order (tolerance rtol 1e-4, atol 1e-5 on the loss and on every
parameter after two steps), for models without batch statistics. Batch norm normalises each
microbatch, and each replica, on its own, as every pipeline and data-parallel runner does; its running
statistics are then updated once per microbatch (replica 0's are reported).

Backends: gloo on CPU (tested), NCCL when every process has a CUDA device (written for it: one
communication thread per process, one order per pair, tested on gloo; NCCL itself untested here, no
GPU).
"""
import ctypes
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from collections import defaultdict
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.fx

from placement import plan_schedule, shm_channel, torch_export, torch_run

_ALIGN = 8  # payload segments start at multiples of 8 bytes, so that any dtype can view them
PER_COPY, GRADIENT, ONCE, TOKEN = plan_schedule.PER_COPY, plan_schedule.GRADIENT, plan_schedule.ONCE, "token"


def _aligned(size):
    return (size + _ALIGN - 1) // _ALIGN * _ALIGN


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
_retained = None


def retain_freed_memory():
    """Keeps the memory that freed tensors leave in this process's heap, for the next ones, instead of
    giving it back to the kernel (glibc: mmap threshold 1 GiB, no trimming; what PyTorch's CUDA caching
    allocator does for device memory). By default glibc serves each large CPU tensor with a fresh mmap
    and unmaps it when freed, so every step faults its activations in again, page by page: a batch-32
    CNN step here took 38.7 ms with 9,100 page faults (batch 16: 15.8 ms), 20.5 ms with 256 after this
    (batch 16: 10.5 ms): op costs that depend on the allocator's state, which calibration cannot follow. Called once per
    process by DistributedStep (so by calibration too); the price is a resident heap as large as the
    step's peak. Returns whether it took effect: not off glibc, nor with PLACEMENT_RETAIN_FREED_MEMORY=0
    in the environment."""
    global _retained
    if _retained is None:
        _retained = False
        if os.environ.get("PLACEMENT_RETAIN_FREED_MEMORY", "1") != "0":
            try:
                libc = ctypes.CDLL("libc.so.6")
                _retained = bool(libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30)) and \
                    bool(libc.mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1))
            except (OSError, AttributeError):  # not glibc
                pass
    return _retained


class PlanError(ValueError):
    """A plan that this runner cannot execute (the message says why and what to change)."""


# ---------------------------------------------------------------------------------------------------
# The program: what every process knows before a step (the same in all of them)


@dataclass
class Message:
    """One transfer of the unrolled step: op `op`'s copy `microbatch` (-1: once or accumulated) of kind
    `kind` from device `source` to `destination` (devices of replica group 0), carrying `nodes`."""

    op: int
    microbatch: int
    kind: str
    source: int
    destination: int
    order: tuple  # position in the one order every pair follows
    nodes: list = field(default_factory=list)
    shapes: list = field(default_factory=list)  # (shape, dtype, offset, bytes) per node
    nbytes: int = _ALIGN


class PlanProgram:
    """The static analysis of a traced step under a placement and its plan: which process runs what,
    in which order, and which messages cross devices. Raises PlanError for plans it cannot run."""

    def __init__(self, traced, request, placement):
        ops = request["graph"]["ops"]
        n = len(ops)
        self.request, self.ops, self.traced = request, ops, traced
        self.index_of = {op["name"]: i for i, op in enumerate(ops)}
        devices, plan = _devices_and_plan(request, placement)
        if len(devices) != n:
            raise PlanError(f"the placement has {len(devices)} devices for {n} ops")
        op_of = torch_run.node_ops(traced)
        missing = sorted({name for name in op_of.values() if name not in self.index_of})
        if missing or len(set(op_of.values())) != n:
            raise PlanError(f"the request does not describe this traced step (unknown ops: {missing[:5]})")
        graph_nodes = list(traced.graph_module.graph.nodes)
        self.nodes = [x for x in graph_nodes if x.op in ("placeholder", "call_function")]
        self.output_node = next(x for x in graph_nodes if x.op == "output")
        self.op_index = {x: self.index_of[op_of[x]] for x in self.nodes}
        self.op_nodes = [[] for _ in range(n)]
        for x in self.nodes:
            self.op_nodes[self.op_index[x]].append(x)
        self.placeholder_kind = {}
        for x, (kind, key, _) in zip([x for x in graph_nodes if x.op == "placeholder"], traced.placeholders):
            self.placeholder_kind[x] = (kind, key)

        reads, war, self.written_in_place = self._analyse_versions()
        # The order: the simulator's schedule, plus a zero-cost edge from each read to a later in-place
        # write of the same storage on the same device (the service's simulator has no such edge: the
        # exporter only orders writes before later reads).
        scheduled = request
        extra = sorted({(r, w) for r, w in war if devices[r] == devices[w] and r != w})
        if extra:
            scheduled = dict(request, graph=dict(request["graph"], edges=list(request["graph"]["edges"]) + [
                {"src": r, "dst": w} for r, w in extra]))
        self.extra_edges = extra
        self.schedule = plan_schedule.simulate(scheduled, (devices, plan))
        s = self.schedule
        self.devices, self.once = devices, s.once
        self.microbatches, self.window, self.replicas = s.microbatches, s.max_in_flight, s.data_parallel
        self.group_size = len(request["cluster"]["devices"]) // self.replicas
        self._plan_reads(reads)
        self._plan_messages(scheduled)
        self._plan_outputs()

    # -- versions of in-place written storage ---------------------------------------------------------

    def _analyse_versions(self):
        """For each (reader node, input node): the node whose op made the version the reader reads (the
        input itself, or the in-place write after which it is read). Also the (reader op, writer op)
        pairs of reads followed by a write of the same storage (write-after-read), and the nodes whose
        storage some op writes in place (a node and every alias of it)."""
        root, writes, exec_version, version_writer = {}, defaultdict(int), {}, {}
        readers_since = defaultdict(list)
        reads, war = {}, []
        for x in self.nodes:
            if x.op == "placeholder":
                root[x], exec_version[x] = x, 0
                continue
            inputs = torch_export._input_nodes(x)
            if torch_export._aliases_an_input(x) and inputs:
                root[x] = torch_export._alias_root(x, inputs[0], root)
                exec_version[x] = exec_version.get(inputs[0], 0)  # runs with its base, inline
                for q in inputs:
                    reads[(x, q)] = q
                continue
            written = torch_export._written_arguments(x)
            for q in inputs:
                r = root.get(q, q)
                v = writes[r]
                reads[(x, q)] = q if v == exec_version.get(q, 0) else version_writer[(r, v)]
            if written and torch_run._returns_alias(x):
                root[x] = root.get(written[0], written[0])
            else:
                root[x] = x
            written_roots = {root.get(w, w) for w in written}
            for r in written_roots:
                war.extend((self.op_index[reader], self.op_index[x]) for reader in readers_since[r])
                readers_since[r] = []
                writes[r] += 1
                version_writer[(r, writes[r])] = x
            for q in inputs:
                r = root.get(q, q)
                if r not in written_roots:
                    readers_since[r].append(x)
            exec_version[x] = writes[root[x]]
        written_in_place = {x for x in self.nodes if writes[root.get(x, x)] > 0}
        return reads, war, written_in_place

    # -- where every read comes from ------------------------------------------------------------------

    def _plan_reads(self, reads):
        """self.fetch[(node, input)]: ("own",) inside the instance, ("local", once) the device's store,
        ("acc",) the accumulated gradient, or ("msg", op, kind) a received message."""
        devices, once = self.devices, self.once
        self.fetch = {}
        self.acc_nodes = defaultdict(list)  # gradient producer -> its nodes read by once ops
        self.needs = defaultdict(set)  # (op, kind, destination) -> nodes carried
        for (x, q), source in reads.items():
            r, p, src = self.op_index[x], self.op_index[q], self.op_index[source]
            name = self.ops[r]["name"]
            if p == r:
                self.fetch[(x, q)] = ("own",)
                continue
            d = devices[r]
            if once[r] and not once[p]:
                if src != p:
                    raise PlanError(f"{name} runs once per step but reads {q.name} after {source.name} wrote it "
                                    f"in place in every microbatch")
                if q not in self.acc_nodes[p]:
                    self.acc_nodes[p].append(q)
                if devices[p] == d:
                    self.fetch[(x, q)] = ("acc",)
                else:
                    self.fetch[(x, q)] = ("msg", p, GRADIENT)
                    self.needs[(p, GRADIENT, d)].add(q)
                continue
            if devices[src] == d:
                if devices[p] != d:
                    raise PlanError(f"{name} reads {q.name}, written in place by {source.name} on device "
                                    f"{d}, where {self.ops[p]['name']} (device {devices[p]}) made it: place "
                                    f"{source.name} with {self.ops[p]['name']}")
                self.fetch[(x, q)] = ("local", once[p])
                continue
            if src != p and devices[src] != devices[p]:
                raise PlanError(f"{name} reads {q.name} after {source.name} wrote it in place on device "
                                f"{devices[src]}, away from where it lives (device {devices[p]}): place "
                                f"them together")
            kind = ONCE if once[src] else PER_COPY
            self.fetch[(x, q)] = ("msg", src, kind)
            self.needs[(src, kind, d)].add(q)

    # -- messages and their order ---------------------------------------------------------------------

    def _plan_messages(self, scheduled):
        s, devices, once = self.schedule, self.devices, self.once
        self.messages = {}  # (op, microbatch, kind, destination) -> Message
        position = {x: i for i, x in enumerate(self.nodes)}
        self.meta = meta = _node_metadata(self.traced)  # node -> (shape, dtype, bytes)
        for index, t in enumerate(s.transfers):
            key = (t.op, t.microbatch, t.kind, t.destination)
            carried = sorted(self.needs.get((t.op, t.kind, t.destination), ()), key=position.get)
            message = Message(t.op, t.microbatch, t.kind, t.source, t.destination, (t.event, 0, index), carried)
            offset = 0
            for q in carried:
                shape, dtype, nbytes = meta[q]
                message.shapes.append((shape, dtype, offset, nbytes))
                offset += _aligned(nbytes)
            message.nbytes = max(offset, _ALIGN)
            self.messages[key] = message
        for (op, kind, d), nodes in self.needs.items():
            m = 0 if kind == PER_COPY else -1
            if (op, m, kind, d) not in self.messages:
                raise PlanError(f"{nodes and sorted(x.name for x in nodes)[0]} is read on device {d} from "
                                f"{self.ops[op]['name']}, which the request does not connect to its reader")
        # What each instance waits for: the messages of its cross-device in-edges (as the simulator).
        preds = defaultdict(set)
        for e in scheduled["graph"]["edges"]:
            preds[int(e.get("dst", 0))].add(int(e.get("src", 0)))
        self.incoming = {}
        for v in range(len(self.ops)):
            keys = []
            for u in sorted(preds[v]):
                if devices[u] == devices[v]:
                    continue
                kind = ONCE if once[u] else (GRADIENT if once[v] else PER_COPY)
                keys.append((u, kind))
            self.incoming[v] = keys
        # Windows: each device tells the others of its group when it has finished a microbatch.
        self.last_of_microbatch = {}  # device -> {microbatch: (op, microbatch) of its last instance}
        for d, order in enumerate(s.order):
            for op, m in order:
                if m >= 0:
                    self.last_of_microbatch.setdefault(d, {})[m] = (op, m)
        self.tokens = []
        if self.window < self.microbatches:
            has_microbatch = [d for d in range(self.group_size) if d in self.last_of_microbatch]
            for d in has_microbatch:
                for m, instance in self.last_of_microbatch[d].items():
                    if m + self.window >= self.microbatches:
                        continue
                    for e in has_microbatch:
                        if e != d:
                            key = (-1, m, TOKEN, e, d)
                            self.messages[key] = Message(-1, m, TOKEN, d, e, (s.finish_event[instance], 1, d, e))
                            self.tokens.append(key)

    def _plan_outputs(self):
        new_params, new_states, loss, _ = self.output_node.args[0]
        self.loss_node = loss
        self.loss_op = self.op_index[loss]
        placeholders = [x for x in self.nodes if x.op == "placeholder"]
        self.param_nodes = [x for x in placeholders if self.placeholder_kind[x][0] == "param"]
        self.state_nodes = [x for x in placeholders if self.placeholder_kind[x][0] == "state"]
        self.buffer_nodes = [x for x in placeholders if self.placeholder_kind[x][0] == "buffer"]
        self.input_nodes = [x for x in placeholders if self.placeholder_kind[x][0] == "input"]
        if self.replicas > 1 and not any(self.once):
            raise PlanError("data_parallel > 1 needs the optimizer update marked once_per_step (export the "
                            "step with --data_parallel or --microbatches) to know what to all-reduce")
        self.commits = []  # (placeholder, node of its new value)
        for holder, out in list(zip(self.param_nodes, new_params)) + list(zip(self.state_nodes, new_states)):
            if self.devices[self.op_index[out]] != self.devices[self.op_index[holder]]:
                raise PlanError(f"the update {out.name} runs on device {self.devices[self.op_index[out]]}, "
                                f"away from {self.ops[self.op_index[holder]]['name']} (device "
                                f"{self.devices[self.op_index[holder]]}): keep their colocation group")
            if not self.once[self.op_index[out]] and self.microbatches > 1:
                raise PlanError(f"the update {out.name} is not once_per_step: export the step with "
                                f"--microbatches")
            self.commits.append((holder, out))


def _devices_and_plan(request, placement):
    if isinstance(placement, dict):
        devices = [int(d) for d in placement["device"]]
        plan = dict(placement.get("plan") or {})
    elif hasattr(placement, "device") and hasattr(placement, "plan"):
        devices = [int(d) for d in placement.device]
        plan = {"microbatches": placement.plan.microbatches, "max_in_flight": placement.plan.max_in_flight,
                "data_parallel": placement.plan.data_parallel}
    else:
        devices, plan = placement
        plan = dict(plan or {})
    options = request.get("options", {})
    for name in ("microbatches", "max_in_flight", "data_parallel"):
        if not int(plan.get(name) or 0) and int(options.get(name) or 0):
            plan[name] = int(options[name])
    return list(devices), plan


def _node_metadata(traced):
    """(shape, dtype, bytes) of every tensor node, from one run of the traced step."""
    recorder = torch_export._Recorder(traced.graph_module)
    values = traced.initial_values or traced.flat_args
    with torch.no_grad():
        recorder.run(*[v.clone() for v in values])
    meta = {}
    for x in traced.graph_module.graph.nodes:
        value = recorder.values.get(x.name)
        if isinstance(value, torch.Tensor):
            meta[x] = (tuple(value.shape), value.dtype, value.numel() * value.element_size())
    return meta


# ---------------------------------------------------------------------------------------------------
# Running


@dataclass
class DistTiming:
    """What one step measured in this process."""

    wall_ns: int = 0  # from the common start (a barrier) to this process's last send completing
    step_ns: int = 0  # the slowest process's wall_ns (every process knows it)
    instances: list = field(default_factory=list)  # (op, microbatch, start, end, kernel_ns, wait_ns)
    kernel_ns: int = 0  # time inside aten ops
    wait_ns: int = 0  # time waiting for messages, all-reduces and window tokens
    overhead_ns: int = 0  # the rest of the instances' time: the runner's own work per op
    messages_sent: int = 0
    bytes_sent: int = 0


class _Slot:
    __slots__ = ("message", "peer", "send", "tag", "buffer", "work", "issued", "values", "shm", "flat")

    def __init__(self, message, peer, send, tag, shm=None):
        self.message, self.peer, self.send, self.tag = message, peer, send, tag
        self.buffer = self.work = self.values = self.flat = None
        self.shm = shm  # (peer rank, message number) where the message goes through shared memory
        self.issued = threading.Event()


class _Written:
    """A message packed into shared memory: sent once written (the channel's wait for a sender)."""

    @staticmethod
    def wait():
        return True


_WRITTEN = _Written()


class _Receipt:
    """A message coming through shared memory: its wait blocks until the sender has written it."""

    __slots__ = ("channels", "peer", "number", "timeout_s")

    def __init__(self, channels, peer, number, timeout_s):
        self.channels, self.peer, self.number, self.timeout_s = channels, peer, number, timeout_s

    def wait(self):
        self.channels.wait(self.peer, self.number, self.timeout_s)
        return True


class DistributedStep:
    """One process's part of a placed plan (see the module docstring). Constructing it is collective:
    every rank of the default process group builds it with the same arguments (ranks beyond K x D take
    no part in the step but must still build it and call run)."""

    def __init__(self, traced, request, placement, device=None, local=False, ordered=None, transport=None,
                 timeout_s=300):
        """`local`: run in this process alone, outside any process group (a plan of one device and one
        replica; what calibration uses). `ordered`: post every pair's messages in one agreed order from a
        communication thread (what NCCL needs; the default there) rather than receives at once and sends
        from the computing thread (gloo's default). `transport`: how messages between two processes of
        one host travel on CPU — "shm" (shared memory, placement.shm_channel: the default where every
        process can use it), "gloo" (the process group's send and receive); NCCL's and other hosts'
        messages always take the process group. `timeout_s`: how long a process waits for a message
        that comes through shared memory."""
        retain_freed_memory()
        self.program = program = PlanProgram(traced, request, placement)
        self.traced = traced
        k, d_count = program.group_size, program.replicas
        grouped = dist.is_initialized() and not local
        self.world = dist.get_world_size() if grouped else 1
        self.rank = dist.get_rank() if grouped else 0
        needed = k * d_count
        if needed > self.world:
            raise PlanError(f"the plan runs on {k} devices x {d_count} replica groups = {needed} processes; "
                            f"{self.world} are running (launch {needed})")
        self.active = self.rank < needed
        self.replica, self.local = divmod(self.rank, k)
        self.device = torch.device(device) if device is not None else _default_device(grouped)
        self.plan_group = self.rings = None
        if self.world > 1:
            self.plan_group = dist.new_group(list(range(needed))) if needed < self.world else None
            if d_count > 1:
                self.rings = [dist.new_group([d + g * k for g in range(d_count)]) for d in range(k)]
        self.step_index = 0
        self.last_timing = None
        self.loss = None
        self._sleep_ns, self._owed_ns, self._empty = None, 0, None
        # gloo matches a receive to its send by tag, so every receive can be posted when the step starts
        # and every send as soon as its payload is packed, from the computing thread; NCCL needs one
        # order per pair, kept by a communication thread (see the module docstring).
        self.eager = not ordered if ordered is not None else (not grouped or dist.get_backend() == "gloo")
        if transport not in (None, "shm", "gloo"):
            raise ValueError(f"transport must be 'shm' or 'gloo', not {transport!r}")
        self.timeout_s = timeout_s
        self.channels, self.shm_index, self.per_peer = None, {}, {}
        self._outbound_cache, self._inbound_cache = {}, {}  # slot key -> views of shared memory, made once
        self.ring, self.ring_items = None, {}  # the replica ring through shared memory, its items per producer
        if self.active:
            self._prepare_order()
        # What this process's messages and all-reduces travel by: "shm", "gloo" (also NCCL's), "none".
        self.transport = _transport_of(self.per_peer, {})
        self.all_reduce_transport = "gloo" if self.active and self.rings is not None else "none"
        if self.world > 1:
            self._open_channels(transport)
        if not self.active:
            return
        self._load_state()

    # -- setup ----------------------------------------------------------------------------------------

    def _prepare_order(self):
        p, d = self.program, self.local
        self.order = p.schedule.order[d]
        mine = [m for m in p.messages.values() if d in (m.source, m.destination)]
        mine.sort(key=lambda m: m.order)
        self.per_peer = defaultdict(list)
        for m in mine:
            peer = m.destination if m.source == d else m.source
            self.per_peer[peer].append(m)
        self.send_keys = defaultdict(list)  # (op, kind) -> [message keys] this process sends after it
        for key, m in p.messages.items():
            if m.source == d and m.kind != TOKEN:
                self.send_keys[(m.op, m.kind)].append(key)
        self.token_keys = defaultdict(list)  # microbatch -> keys of the tokens this process sends
        self.token_waits = defaultdict(list)  # microbatch -> keys of the tokens it waits for
        for key in p.tokens:
            m = p.messages[key]
            if m.source == d:
                self.token_keys[m.microbatch].append(key)
            if m.destination == d:
                self.token_waits[m.microbatch].append(key)
        self.last_instance = {instance: m for m, instance in p.last_of_microbatch.get(d, {}).items()}
        self.all_reduce_order = p.schedule.all_reduces[d] if p.replicas > 1 else []

    def _global_rank(self, device):
        return self.replica * self.program.group_size + device

    def _open_channels(self, transport):
        """Collective: decides which pairs of processes exchange messages through shared memory (both
        on one host, CPU, gloo's eager posting, nobody asking for gloo) and sets their channels up; if
        any process cannot, every pair keeps gloo (self.transport says which, self.transport_note why)."""
        self.transport_note = ""
        wanted = transport != "gloo" and self.eager and self.device.type == "cpu" and shm_channel.usable()
        everyone = shared_memory_peers(wanted)
        mine = everyone[self.rank]
        if not all(x["wanted"] for x in everyone):
            self.transport_note = "a process cannot use shared memory (or was asked for gloo)"
            return
        if not self.active:
            set_up_together([], True)  # takes part in the agreement, with nothing of its own to set up
            return
        d = self.local
        outbound, inbound = {}, {}
        for peer, messages in sorted(self.per_peer.items()):
            peer_rank = self._global_rank(peer)
            if everyone[peer_rank]["host"] != mine["host"]:
                continue
            out_sizes, in_sizes = outbound.setdefault(peer_rank, []), inbound.setdefault(peer_rank, [])
            for m in messages:
                sizes = out_sizes if m.source == d else in_sizes
                self.shm_index[_slot_key(m)] = (peer_rank, len(sizes))
                sizes.append(m.nbytes)
        # The replica ring of this device, where all its members share this host: one item per
        # gradient tensor it all-reduces, in all_reduce_order.
        p, k = self.program, self.program.group_size
        members = [d + g * k for g in range(p.replicas)]
        ring_sizes = []
        if p.replicas > 1 and all(everyone[r]["host"] == mine["host"] for r in members):
            for u in self.all_reduce_order:
                self.ring_items[u] = []
                for q in p.acc_nodes[u]:
                    self.ring_items[u].append((q, len(ring_sizes)))
                    ring_sizes.append(p.meta[q][2])
        made, error = [], None
        try:
            made.append(shm_channel.SameHostChannels(everyone[0]["token"], self.rank, outbound, inbound))
            if self.ring_items:
                made.append(shm_channel.SameHostRing(everyone[0]["token"], self.replica, members, ring_sizes))
        except (OSError, shm_channel.ChannelError) as e:
            error = e
        if not set_up_together(made, error is None):
            self.shm_index, self.ring_items = {}, {}
            self.transport_note = "shared memory could not be set up in every process" + (
                f" ({error})" if error else "")
            return
        self.channels = made[0]
        self.ring = made[1] if len(made) > 1 else None
        self.transport = _transport_of(self.per_peer, self.shm_index)
        if self.ring is not None:
            self.all_reduce_transport = "shm"

    def _load_state(self):
        """Parameters, optimizer state and buffers of this device's ops; replica groups start from
        group 0's values (broadcast over each ring)."""
        p = self.program
        values = self.traced.initial_values or [t for _, _, t in self.traced.placeholders]
        placeholders = [x for x in p.nodes if x.op == "placeholder"]
        self.state = {}
        for x, tensor in zip(placeholders, values):
            if p.placeholder_kind[x][0] == "input" or p.devices[p.op_index[x]] != self.local:
                continue
            self.state[x] = tensor.detach().to(self.device, copy=True)
        if self.rings is not None:
            ring = self.rings[self.local]
            for x in sorted(self.state, key=lambda x: x.name):
                dist.broadcast(self.state[x], src=self.local, group=ring)

    # -- a step ---------------------------------------------------------------------------------------

    def run(self, inputs, targets=()):
        """Runs one step on the batch of every replica group (inputs as traced, then the loss's
        targets; D x batch samples, replica g taking the g-th slice). Returns the step's loss (the mean
        over replicas of the sum of the microbatches' losses), the same in every process."""
        batch = list(inputs) + list(targets)
        p = self.program
        if len(batch) != len(p.input_nodes):
            raise ValueError(f"the step takes {len(p.input_nodes)} inputs and targets; {len(batch)} given")
        self._sleep_ns = None
        return self._step(batch)

    def rehearse(self, costs):
        """Runs the step's schedule with every instance sleeping for its op's cost ({op name: ns})
        instead of computing; messages, all-reduces and window tokens go as in a step (their payloads
        uninitialised tensors of the right sizes). Sleeping needs no CPU: this checks the runner's
        schedule against the simulator where the machine has no free core. The state is untouched;
        the timing is in last_timing (collective, as run)."""
        p = self.program
        self._sleep_ns = [int(costs.get(op["name"], 0)) for op in p.ops]
        self._owed_ns = 0
        try:
            return self._step(None)
        finally:
            self._sleep_ns = None

    def _step(self, batch):
        loss = torch.zeros((), dtype=torch.float64)
        timing = DistTiming()
        if self.plan_group is not None or self.world > 1:
            if self.active:
                dist.barrier(group=self.plan_group)
        if self.active:
            timing = self._run_active(batch)
            loss = self.loss.detach().to("cpu", torch.float64) if self.loss is not None else loss
        if self.world > 1:
            summary = torch.tensor([float(loss), float(timing.wall_ns)], dtype=torch.float64)
            if self.active:
                dist.all_reduce(summary[:1], group=self.plan_group)
                wall = summary[1:].clone()
                dist.all_reduce(wall, op=dist.ReduceOp.MAX, group=self.plan_group)
                timing.step_ns = int(wall.item())
                loss = summary[0] / self.program.replicas
        else:
            timing.step_ns = timing.wall_ns
        self.last_timing = timing
        self.step_index += 1
        return loss.to(torch.float32)

    def _microbatch_inputs(self, batch):
        p = self.program
        if batch is None:  # a rehearsal
            return {}
        per_replica = None
        values = {}
        for x, tensor in zip(p.input_nodes, batch):
            if p.devices[p.op_index[x]] != self.local:
                continue
            rows = tensor.shape[0]
            if rows % (p.replicas * p.microbatches):
                raise ValueError(f"the batch of {rows} samples does not split into {p.replicas} replica groups "
                                 f"x {p.microbatches} microbatches")
            per_replica = rows // p.replicas
            size = per_replica // p.microbatches
            first = self.replica * per_replica
            values[x] = [tensor[first + m * size:first + (m + 1) * size].to(self.device)
                         for m in range(p.microbatches)]
        return values

    def _run_active(self, batch):
        p = self.program
        d = self.local
        inputs = self._microbatch_inputs(batch)
        store = {}  # (node, microbatch or -1) -> value
        acc = {}  # node -> accumulated gradient
        cond = threading.Condition()
        slots = {}
        tag_base = (self.step_index % 20_000) * 100_000  # gloo tags are 32-bit
        if any(len(messages) >= 100_000 for messages in self.per_peer.values()):
            raise PlanError("more than 100,000 messages between two processes in one step")
        queues = []
        channels = self.channels
        if channels is not None:
            channels.begin_step(self.step_index)
        if self.ring is not None:
            self.ring.begin_step(self.step_index)
        for peer, messages in sorted(self.per_peer.items()):
            row = []
            for k, m in enumerate(messages):
                key = _slot_key(m)
                slot = _Slot(m, self._global_rank(peer), m.source == d, tag_base + k, self.shm_index.get(key))
                slots[key] = slot
                row.append(slot)
            queues.append(row)
        failure = []
        comm = None
        if self.eager:
            for row in queues:
                for slot in row:
                    if slot.send:
                        continue
                    if slot.shm is not None:
                        slot.buffer, slot.flat = self._inbound_views(_slot_key(slot.message), slot)
                        slot.work = _Receipt(channels, slot.shm[0], slot.shm[1], self.timeout_s)
                    else:
                        slot.buffer = torch.empty(slot.message.nbytes, dtype=torch.uint8, device=self.device)
                        slot.work = dist.irecv(slot.buffer, slot.peer, tag=slot.tag)
                    slot.issued.set()
        else:
            comm = threading.Thread(target=self._communicate, args=(queues, cond, failure), daemon=True,
                                    name="placement-comm")
        reduced = {}  # gradient producer -> threading.Event
        reducer_queue = queue.Queue()
        reducer = None
        if p.replicas > 1 and self.all_reduce_order:
            for u in self.all_reduce_order:
                reduced[u] = threading.Event()
            reducer = threading.Thread(target=self._reduce, args=(reducer_queue, acc, reduced, slots, cond, failure),
                                       daemon=True, name="placement-allreduce")
        copies_left = defaultdict(lambda: p.microbatches)
        next_reduce = 0
        ready_to_reduce = set()
        self.loss = None
        timing = DistTiming()
        clock = time.perf_counter_ns
        started = clock()
        if comm is not None:
            comm.start()
        if reducer is not None:
            reducer.start()
        try:
            for op, m in self.order:
                began = clock()
                waited = 0
                # Wait for the window, the incoming messages and the all-reduces this instance reads.
                if m >= 0 and m >= p.window and p.window < p.microbatches:
                    for key in self.token_waits.get(m - p.window, ()):
                        slot = slots[key]
                        if slot.values is None:  # a receive is waited for once (gloo blocks on a second)
                            waited += _wait_slot(slot, clock)
                            slot.values = {}
                for u, kind in p.incoming[op]:
                    key = (u, m if kind == PER_COPY else -1, kind, d)
                    slot = slots.get(key)
                    if slot is not None and slot.values is None:
                        waited += _wait_slot(slot, clock)
                        slot.values = _unpack(slot.message, slot.buffer, slot.flat)
                if p.once[op] and reduced:
                    for x in p.op_nodes[op]:
                        for q in torch_export._input_nodes(x):
                            u = p.op_index[q]
                            if u in reduced and p.fetch.get((x, q)) == ("acc",):
                                w0 = clock()
                                reduced[u].wait()
                                waited += clock() - w0
                    if failure:
                        raise failure[0]
                kernel = self._execute(op, m, store, acc, slots, inputs)
                # Gradient producers: sum the copies; the last one releases (or all-reduces) the sum.
                if not p.once[op] and op in p.acc_nodes:
                    for q in p.acc_nodes[op]:
                        value = store[(q, m)]
                        if self._sleep_ns is not None:
                            acc.setdefault(q, value)  # a rehearsal sums nothing (its values are placeholders)
                        elif q not in acc:
                            # (A sum of one, not all-reduced, may stay the value itself.)
                            acc[q] = value.detach().clone() if p.microbatches > 1 or reduced else value
                        else:
                            acc[q].add_(value)
                    copies_left[op] -= 1
                    if copies_left[op] == 0:
                        if reduced:
                            ready_to_reduce.add(op)
                            while next_reduce < len(self.all_reduce_order) and \
                                    self.all_reduce_order[next_reduce] in ready_to_reduce:
                                u = self.all_reduce_order[next_reduce]
                                self._start_all_reduce(u, acc, reducer_queue)
                                next_reduce += 1
                        else:
                            self._post(slots, cond, (op, GRADIENT), -1, lambda q, _m: acc[q], timing)
                # This instance's transfers leave now.
                if p.once[op]:
                    self._post(slots, cond, (op, ONCE), -1, lambda q, _m: store[(q, -1)], timing)
                else:
                    self._post(slots, cond, (op, PER_COPY), m, lambda q, mm: store[_key(p, q, mm)], timing)
                if op == p.loss_op:
                    value = store[(p.loss_node, m)]
                    self.loss = value.detach().clone() if self.loss is None else self.loss + value
                finished = clock()
                timing.instances.append((op, m, began - started, finished - started, kernel, waited))
                timing.kernel_ns += kernel
                timing.wait_ns += waited
                timing.overhead_ns += finished - began - waited - kernel
                last_of = self.last_instance.get((op, m))
                if last_of is not None:
                    for key in self.token_keys.get(last_of, ()):
                        self._post_slot(slots[key], cond, torch.zeros(_ALIGN, dtype=torch.uint8, device=self.device))
                    # Microbatch m is done here: its values (not the accumulated sums) can go.
                    if p.microbatches > 1:
                        for key in [key for key in store if key[1] == last_of]:
                            del store[key]
                if failure:
                    raise failure[0]
        except BaseException:
            with cond:
                failure.append(RuntimeError("the step failed in this process"))
                cond.notify_all()
            raise
        if comm is not None:
            comm.join()
        if reducer is not None:
            reducer_queue.put(None)
            reducer.join()
        if failure:
            raise failure[0]
        for slot in slots.values():
            if slot.send:
                slot.work.wait()
        timing.wall_ns = clock() - started
        # The new parameters and optimizer state replace the old ones, on their device.
        for holder, out in p.commits if self._sleep_ns is None else ():
            if holder in self.state:
                value = store[_key(p, out, 0)]
                if (channels is not None and channels.contains(value)) or \
                        (self.ring is not None and self.ring.contains(value)):
                    value = value.clone()  # memory a peer rewrites next step
                self.state[holder] = value
        if self._sleep_ns is not None:
            self.loss = None
        return timing

    def _execute(self, op, m, store, acc, slots, inputs):
        """Runs instance (op, m): its nodes in program order (the op's own node, then its views).
        Returns the ns spent in aten ops."""
        p = self.program
        mine = -1 if p.once[op] else m
        kernel = 0
        clock = time.perf_counter_ns
        d = self.local
        if self._sleep_ns is not None:
            return self._sleep(op, mine, store)
        for x in p.op_nodes[op]:
            if x.op == "placeholder":
                store[(x, mine)] = inputs[x][m] if p.placeholder_kind[x][0] == "input" else self.state[x]
                continue

            def fetch(q, x=x):
                how = p.fetch[(x, q)]
                if how[0] == "own":
                    return store[(q, mine)]
                if how[0] == "local":
                    return store[(q, -1 if how[1] else m)]
                if how[0] == "acc":
                    return acc[q]
                _, src, kind = how
                key = (src, m if kind == PER_COPY else -1, kind, d)
                return slots[key].values[q]

            args = torch.fx.node.map_arg(x.args, fetch)
            kwargs = torch.fx.node.map_arg(x.kwargs, fetch)
            if isinstance(kwargs.get("device"), torch.device):
                kwargs = dict(kwargs, device=self.device)  # factory ops were traced on the CPU
            began = clock()
            store[(x, mine)] = x.target(*args, **kwargs)
            kernel += clock() - began
        return kernel

    def _sleep(self, op, mine, store):
        """A rehearsed instance: sleeps for the op's cost (paying back earlier oversleeping, as the
        sleeps of a loaded machine overshoot) and leaves placeholder values of the right shapes."""
        began = time.perf_counter_ns()
        want = self._sleep_ns[op] - self._owed_ns
        if want > 0:
            time.sleep(want / 1e9)
        spent = time.perf_counter_ns() - began
        self._owed_ns = max(0, self._owed_ns + spent - self._sleep_ns[op])
        if self._empty is None:
            self._empty = ({}, _node_metadata(self.traced))
        made, metadata = self._empty
        for x in self.program.op_nodes[op]:
            if x not in made and x in metadata:  # made once, when first needed
                shape, dtype, _ = metadata[x]
                made[x] = torch.empty(shape, dtype=dtype, device=self.device)
            store[(x, mine)] = made.get(x)
        return spent

    def _post(self, slots, cond, what, m, value_of, timing):
        for key in self.send_keys.get(what, ()):
            if key[1] != m:
                continue
            slot = slots[key]
            message = slot.message
            values = [value_of(q, m) for q in message.nodes]
            # Packed where it goes: the receiver's shared memory, or a fresh buffer for the process group.
            if slot.shm is not None:
                buffer, targets = self._outbound_views(key, slot)
                _copy_into(targets, values)
            else:
                buffer = torch.empty(message.nbytes, dtype=torch.uint8, device=self.device)
                _pack_into(message, values, buffer)
            timing.messages_sent += 1
            timing.bytes_sent += buffer.numel()
            self._post_slot(slot, cond, buffer)

    def _outbound_views(self, key, slot):
        """The receiver's memory for this message and a view of it shaped as each of its tensors, made
        once: the region is mapped for the step object's life, and the views are the runner's own (no
        op ever sees them), so every step copies straight into them — a view made per tensor per message
        cost the sending thread ~8 µs each, three quarters of packing a small message."""
        made = self._outbound_cache.get(key)
        if made is None:
            buffer = self.channels.outbound(*slot.shm)
            made = self._outbound_cache[key] = (buffer, _views(slot.message, buffer))
        return made

    def _inbound_views(self, key, slot):
        """This message's memory in shared memory, flat and typed per tensor, made once (each step
        shapes them afresh: the values an op receives are new tensors every step, so an op changing a
        value's shape in place changes nothing the next step reads)."""
        made = self._inbound_cache.get(key)
        if made is None:
            buffer = self.channels.inbound(*slot.shm)
            made = self._inbound_cache[key] = (buffer, _views(slot.message, buffer, shaped=False))
        return made

    def _post_slot(self, slot, cond, buffer):
        if slot.shm is not None:  # written into the receiver's memory already (a token carries nothing)
            slot.buffer, slot.work = buffer, _WRITTEN
            self.channels.notify(*slot.shm)
            slot.issued.set()
            return
        if self.eager:
            slot.buffer = buffer
            slot.work = dist.isend(buffer, slot.peer, tag=slot.tag)
            slot.issued.set()
            return
        with cond:
            slot.buffer = buffer
            cond.notify_all()

    def _communicate(self, queues, cond, failure):
        """Posts every message of this process, pair by pair in the one agreed order: a receive as soon
        as it is next, a send once its payload is packed."""
        heads = [0] * len(queues)
        try:
            while True:
                with cond:
                    progressed, remaining = False, 0
                    for i, row in enumerate(queues):
                        while heads[i] < len(row):
                            slot = row[heads[i]]
                            if slot.send:
                                if slot.buffer is None:
                                    break
                                slot.work = dist.isend(slot.buffer, slot.peer, tag=slot.tag)
                            else:
                                slot.buffer = torch.empty(slot.message.nbytes, dtype=torch.uint8, device=self.device)
                                slot.work = dist.irecv(slot.buffer, slot.peer, tag=slot.tag)
                            slot.issued.set()
                            heads[i] += 1
                            progressed = True
                        remaining += len(row) - heads[i]
                    if not remaining or failure:
                        return
                    if not progressed:
                        cond.wait()
        except BaseException as error:  # noqa: BLE001 - reported by the compute thread
            with cond:
                failure.append(error)
            for row in queues:
                for slot in row:
                    slot.issued.set()

    def _start_all_reduce(self, u, acc, reducer_queue):
        p = self.program
        if self.ring is not None:
            for q, item in self.ring_items[u]:
                self.ring.contribute(item, acc[q])
            reducer_queue.put((u, None))  # the sums are taken on the all-reduce thread
            return
        tensors = [acc[q] for q in p.acc_nodes[u]]
        if len({t.dtype for t in tensors}) == 1:
            flat = torch.cat([t.reshape(-1) for t in tensors]) if len(tensors) > 1 else tensors[0].reshape(-1).clone()
            works = [(dist.all_reduce(flat, group=self.rings[self.local], async_op=True), flat, tensors)]
        else:
            works = [(dist.all_reduce(t, group=self.rings[self.local], async_op=True), None, [t]) for t in tensors]
        reducer_queue.put((u, works))

    def _reduce(self, reducer_queue, acc, reduced, slots, cond, failure):
        """Waits for the ring all-reduces in the order they were started; averages each sum over the
        replicas, then lets its once consumers and its transfers go."""
        p = self.program
        try:
            while True:
                item = reducer_queue.get()
                if item is None:
                    return
                u, works = item
                if works is None:  # through shared memory
                    for q, number in self.ring_items[u]:
                        total = self.ring.total(number, acc[q].dtype, acc[q].shape, self.timeout_s,
                                                divide_by=p.replicas)
                        # The ring's result is shared by its members: read in place unless an op of
                        # this step writes in place where it lies (PlanProgram.written_in_place).
                        acc[q] = total.clone() if q in p.written_in_place else total
                    works = ()
                for work, flat, tensors in works:
                    work.wait()
                    if flat is None:
                        tensors[0].div_(p.replicas)
                        continue
                    offset = 0
                    for q, t in zip(p.acc_nodes[u], tensors):
                        count = t.numel()
                        acc[q] = flat[offset:offset + count].view(t.shape).div_(p.replicas)
                        offset += count
                self._post(slots, cond, (u, GRADIENT), -1, lambda q, _m: acc[q], DistTiming())
                reduced[u].set()
        except BaseException as error:  # noqa: BLE001 - reported by the compute thread
            failure.append(error)
            for event in reduced.values():
                event.set()

    # -- results --------------------------------------------------------------------------------------

    def local_state(self):
        """{"param": {name: tensor}, "state": [(name, tensor)], "buffer": {name: tensor}} of this
        process's ops (CPU copies)."""
        p = self.program
        out = {"param": {}, "state": [], "buffer": {}}
        if not self.active:
            return out
        for x in p.param_nodes:
            if x in self.state:
                out["param"][p.placeholder_kind[x][1]] = self.state[x].detach().cpu()
        for i, x in enumerate(p.state_nodes):
            if x in self.state:
                out["state"].append((i, p.placeholder_kind[x][1], self.state[x].detach().cpu()))
        for x in p.buffer_nodes:
            if x in self.state:
                out["buffer"][p.placeholder_kind[x][1]] = self.state[x].detach().cpu()
        return out

    def gather_state(self, dst=0):
        """Replica group 0's parameters, optimizer state and buffers, gathered on rank `dst` (collective:
        every rank calls it); other ranks get None."""
        mine = self.local_state() if self.replica == 0 or not self.active else {"param": {}, "state": [], "buffer": {}}
        if self.world == 1:
            parts = [mine]
        else:
            parts = [None] * self.world if self.rank == dst else None
            dist.gather_object(mine, parts, dst=dst)
            if self.rank != dst:
                return None
        merged = {"param": {}, "state": [], "buffer": {}}
        for part in parts:
            merged["param"].update(part["param"])
            merged["buffer"].update(part["buffer"])
            merged["state"].extend(part["state"])
        merged["state"] = [(name, t) for _, name, t in sorted(merged["state"], key=lambda e: e[0])]
        return merged


def _key(program, q, m):
    return (q, -1 if program.once[program.op_index[q]] else m)


def _wait_slot(slot, clock):
    began = clock()
    slot.issued.wait()
    if slot.work is None:
        raise RuntimeError("the communication thread stopped")
    slot.work.wait()
    return clock() - began


def shared_memory_peers(wanted, group=None):
    """Collective over `group`: per process, in group order, its host (shm_channel.host_key), whether it
    `wanted` shared memory, a random token (process 0's names the files of the run) and its global rank."""
    everyone = [None] * dist.get_world_size(group)
    dist.all_gather_object(everyone, {"host": shm_channel.host_key(), "wanted": bool(wanted),
                                      "token": os.urandom(8).hex(), "rank": dist.get_rank()}, group=group)
    return everyone


def set_up_together(made, ok, group=None):
    """Collective over `group`: every process has created its sides of shared-memory channels or rings
    (`made`, a list: empty where it takes no part or failed, as `ok` says); once all have, each opens the
    others' sides, and the names are unlinked once all are open. True where every process succeeded;
    else what was made is closed."""
    agreed = [None] * dist.get_world_size(group)
    dist.all_gather_object(agreed, ok, group=group)
    if all(agreed):
        try:
            for each in made:
                each.open_peers()
        except OSError:
            ok = False
        dist.all_gather_object(agreed, ok, group=group)
    for each in made:
        each.forget_names()
        if not all(agreed):
            each.close()
    return all(agreed)


def _transport_of(per_peer, shm_index):
    if not any(per_peer.values()):
        return "none"
    return "shm" if shm_index and len(shm_index) == sum(len(x) for x in per_peer.values()) else "gloo"


def _slot_key(m):
    """The key of a message in a step's slots (tokens also name their sender)."""
    if m.kind == TOKEN:
        return (-1, m.microbatch, TOKEN, m.destination, m.source)
    return (m.op, m.microbatch, m.kind, m.destination)


def _views(message, buffer, shaped=True):
    """Per tensor of the message, its bytes in `buffer` typed (and shaped), or None for an empty one."""
    views = []
    for shape, dtype, offset, nbytes in message.shapes:
        typed = buffer[offset:offset + nbytes].view(dtype) if nbytes else None
        views.append(typed.view(shape) if shaped and typed is not None else typed)
    return views


def _pack_into(message, values, buffer):
    _copy_into(_views(message, buffer), values)


def _copy_into(targets, values):
    for value, target in zip(values, targets):
        if not isinstance(value, torch.Tensor):
            raise PlanError(f"a transfer carries a {type(value).__name__}, not a tensor")
        if target is not None:
            target.copy_(value)


def _unpack(message, buffer, flat=None):
    """The values of a received message; `flat`: its tensors' memory already typed (shared memory)."""
    if flat is None:
        flat = _views(message, buffer, shaped=False)
    values = {}
    for q, typed, (shape, dtype, _, _) in zip(message.nodes, flat, message.shapes):
        values[q] = typed.view(shape) if typed is not None else torch.empty(shape, dtype=dtype, device=buffer.device)
    return values


def _default_device(grouped=True):
    if grouped and dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# ---------------------------------------------------------------------------------------------------
# Processes: torch's launcher conventions


def init_from_environment(backend=None, timeout_s=300):
    """Joins the process group torchrun (or launch_local) described in the environment: MASTER_ADDR,
    MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK. The backend: NCCL when CUDA has a device for every local
    process, else gloo; each NCCL process uses cuda:LOCAL_RANK. Returns (rank, world size)."""
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE") if name not in os.environ]
    if missing:
        raise RuntimeError(f"not started by a launcher: {', '.join(missing)} unset (use torchrun or "
                           f"python3 -m placement.torch_run, which starts the processes itself)")
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    if backend is None:
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
        backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= local_world else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend, init_method="env://", timeout=timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_local(world_size, argv, env=None, timeout_s=None, stdout=None):
    """Starts `world_size` processes of `python3 <argv>` on this host with torchrun's environment
    (MASTER_ADDR/PORT, RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE) and waits for them; when one
    fails the others are stopped. Returns rank 0's standard output (the others' goes to stderr)."""
    import placement

    port = free_port()
    children = []
    # The children import this package (and its generated stubs) from where this process found it.
    roots = [str(Path(folder).resolve().parent) for folder in placement.__path__]
    for rank in range(world_size):
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(
            roots + [x for x in child_env.get("PYTHONPATH", "").split(os.pathsep) if x]))
        child_env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                         WORLD_SIZE=str(world_size), LOCAL_WORLD_SIZE=str(world_size))
        children.append(subprocess.Popen([sys.executable, *argv], env=child_env,
                                         stdout=subprocess.PIPE if rank == 0 else sys.stderr, text=True))
    output = []
    reader = threading.Thread(target=lambda: output.extend(children[0].stdout), daemon=True)
    reader.start()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    failed = None
    while any(c.poll() is None for c in children):
        for rank, c in enumerate(children):
            if c.poll() not in (None, 0) and failed is None:
                failed = (rank, c.returncode)
        if failed or (deadline is not None and time.monotonic() > deadline):
            for c in children:
                if c.poll() is None:
                    c.send_signal(signal.SIGTERM)
            for c in children:
                try:
                    c.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    c.kill()
            break
        time.sleep(0.05)
    reader.join(timeout=10)
    text = "".join(output)
    if stdout is not None:
        stdout.write(text)
    if failed is None:
        failed = next(((rank, c.returncode) for rank, c in enumerate(children) if c.returncode), None)
    if failed is not None or (deadline is not None and time.monotonic() > deadline):
        rank, code = failed if failed else (None, None)
        raise RuntimeError(f"process {rank} of {world_size} failed (exit status {code})" if failed
                           else f"the {world_size} processes did not finish within {timeout_s} s")
    return text
