"""Runs a training step exported by placement.torch_export with every op on the device a placement gave it.

    python3 -m placement.torch_run --model=transformer --batch=8 --devices=2 --microbatches=4 \
        --offline=build/service/offline/placement_offline --algorithm=auto --calibrate --check
    torchrun --nproc_per_node=2 -m placement.torch_run --model=transformer --devices=2 --server=HOST:PORT

The command line runs a plan (api.md 2.1) for real: one process per device on torch.distributed
(placement.torch_dist; it starts the processes itself, or runs under torchrun), rank 0 exporting the
step, calibrating it with --calibrate (placement.calibrate), placing it and sharing the plan. With
--in_process (or --profile) it runs this module's single-process interpreter instead, below: one thread
per device, kept for rehearsing a schedule (its GIL-bound threads cannot show a real speed-up).

From Python (the single-process interpreter, PlacedStep):

    traced = torch_run.trace(model, (images,), loss_fn, "sgd", (labels,))
    request = traced.request(devices=2)                       # torch_export's PlaceRequest (a dict)
    step = torch_run.PlacedStep(traced, request, placement)   # placement: Placement, dict or [device...]
    loss = step.run((images,), (labels,))                     # one step; parameters stay on their devices
    step.parameters()                                         # {name: tensor}

How: torch_export traces the whole step (forward, loss, backward, optimizer update) into one fx graph of
aten ops and makes every non-view node an op of the request. PlacedStep interprets that same graph node by
node. Each node runs on the device of its op (views, `getitem` and `detach` on the device of the op whose
memory they alias); the placement's devices map to `cuda:i` where CUDA has enough devices, otherwise to
CPU workers. Every device has one worker thread (a CPU worker with one intra-op thread) that runs its
ready nodes highest bottom level first, as the simulator does (api.md section 2), and a node's views
right after it (the simulator sends an op's output when the op ends). A tensor read on another
device than the one that made it is copied there once per consumer device (`.to(device, copy=True)`: a
clone on CPU workers) by the consumer's worker; parameters, optimizer state and batch-norm buffers live
on the device of their colocation group across steps. Aten ops release the GIL, so big ops on different
workers overlap; the interpreter itself (tens of us a node) does not.

In-place ops (`relu_`, `add_`, batch-norm statistics) are ordered as in the traced program: every write
waits for the earlier readers and writers of the same storage, every read for the earlier writer, and a
copy made before a write is not reused after it. A write must happen on the device that holds the
storage when the old value is read again later (always true for buffers: the exporter colocates them
with their writers); otherwise PlacedStep refuses the placement.

`profile_costs` measures each op on this machine with this same interpreter (one CPU worker, one thread;
views are charged to the op they alias) and `measure_link` the copy speed between CPU workers, so that a
request's simulated step time and the measured one describe the same program. `PlacedStep.rehearse`
runs the placed schedule with every op sleeping for its cost instead of computing: it checks the
scheduler against the simulator without needing free cores. `reality_check` does all of it for K = 1, 2.
"""
import argparse
import heapq
import json
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.fx

from placement import torch_export


# ---------------------------------------------------------------------------------------------------
# The traced step


@dataclass
class TracedStep:
    """torch_export's traced step: the fx graph of (params, buffers, states, inputs) -> (new params, new
    states, loss, grads), what its placeholders are, and the example tensors it was traced with."""

    graph_module: torch.fx.GraphModule
    placeholders: list  # [(kind, key, tensor)] as torch_export.trace_training_step returns them
    flat_args: list
    optimizer: str = "sgd"
    # The state a step starts from, one tensor per placeholder. Not the placeholders' own tensors:
    # tracing and profiling run the graph, which updates the batch-norm statistics in place.
    initial_values: list = None
    # The step is one of this many microbatches (its loss divided by it; see trace_training_step).
    microbatches: int = 1

    def request(self, **request_options):
        """torch_export.build_request of this step (a dict in the protobuf JSON mapping); a step traced
        as one of M > 1 microbatches asks for a plan of M unless `microbatches` says otherwise."""
        if self.microbatches > 1:
            request_options.setdefault("microbatches", self.microbatches)
        return torch_export.build_request(self.graph_module, self.placeholders, self.flat_args,
                                          optimizer=self.optimizer, **request_options)

    def names(self, kind):
        return [key for k, key, _ in self.placeholders if k == kind]

    def initial(self, kind):
        values = self.initial_values or [tensor for _, _, tensor in self.placeholders]
        return [value for (k, _, _), value in zip(self.placeholders, values) if k == kind]


def trace(model, example_inputs, loss_fn=None, optimizer="sgd", targets=(), lr=0.01, microbatches=1,
          loss_reduction="mean"):
    """Traces `model`'s training step as torch_export does (see trace_training_step); a step starts
    from the model's parameters and buffers as they are now, with zero optimizer state. With
    `microbatches` M the example inputs and targets are one microbatch (torch_export.split_microbatch)."""
    params = [p.detach().clone() for p in model.parameters() if p.requires_grad]
    buffers = [b.detach().clone() for b in model.buffers()]
    graph_module, placeholders, flat = torch_export.trace_training_step(
        model, example_inputs, loss_fn, optimizer, targets, lr=lr, microbatches=microbatches,
        loss_reduction=loss_reduction)
    initial, taken = [], {"param": iter(params), "buffer": iter(buffers)}
    for kind, _, tensor in placeholders:
        initial.append(next(taken[kind]) if kind in taken else
                       torch.zeros_like(tensor) if kind == "state" else tensor)
    return TracedStep(graph_module, placeholders, flat, optimizer, initial, microbatches)


def node_ops(traced):
    """{fx node: request op name}, by torch_export's rules: parameters and their optimizer state are
    `param:<name>`, a module's buffers `buffers:<module>`, inputs `input:<i>`, a view the op it aliases,
    any other node the op of its own name."""
    op_of = {}
    nodes = list(traced.graph_module.graph.nodes)
    placeholder_nodes = [n for n in nodes if n.op == "placeholder"]
    for node, (kind, key, _) in zip(placeholder_nodes, traced.placeholders):
        if kind in ("param", "state"):
            op_of[node] = f"param:{key}"
        elif kind == "buffer":
            op_of[node] = f"buffers:{key.rpartition('.')[0] or '(root)'}"
        else:
            op_of[node] = f"input:{key}"
    for node in nodes:
        if node.op != "call_function":
            continue
        inputs = torch_export._input_nodes(node)
        if torch_export._aliases_an_input(node) and inputs:
            op_of[node] = op_of[inputs[0]]
        else:
            op_of[node] = node.name
    return op_of


# --check's tolerance on the loss and every parameter (torch_dist's numerics: the same step up to
# float32 rounding, sums taken in another order).
CHECK_RTOL, CHECK_ATOL = 1e-4, 1e-5

# aten ops that draw random numbers: a placed run draws them in other processes and in another order
# than the unplaced step, so the two cannot agree.
_RANDOM_OPS = ("dropout", "bernoulli", "rand", "normal", "uniform", "multinomial", "exponential",
               "geometric", "cauchy", "log_normal")


def not_comparable(traced, microbatches=1, replicas=1):
    """Why the placed step cannot equal the unplaced step over the whole batch (empty when it must, up
    to float32 rounding): random ops, and batch statistics taken per microbatch or replica."""
    targets = [str(node.target) for node in traced.graph_module.graph.nodes if node.op == "call_function"]
    reasons = []
    random = sorted({t.split(".")[1] if t.startswith("aten.") else t for t in targets
                     if any(word in t for word in _RANDOM_OPS)})
    if random:
        reasons.append(f"the step draws random numbers: {', '.join(random)}")
    if (microbatches > 1 or replicas > 1) and any("batch_norm" in t for t in targets):
        reasons.append("batch norm takes its statistics per microbatch and per replica")
    return reasons


def _placement_devices(placement):
    """Device index per op from a Placement message, its JSON dict, a file of it, or a list."""
    if isinstance(placement, (str, Path)):
        placement = json.loads(Path(placement).read_text())
    if isinstance(placement, dict):
        return [int(d) for d in placement["device"]]
    if hasattr(placement, "device"):
        return [int(d) for d in placement.device]
    return [int(d) for d in placement]


def resolve_devices(count, devices=None):
    """torch devices for placement indices 0..count-1 and whether they are CPU workers.

    devices: None (CUDA when it has `count` devices, else CPU workers), "cpu", "cuda", or a list of
    device strings (all "cpu", or all distinct CUDA devices)."""
    if devices is None:
        devices = "cuda" if torch.cuda.is_available() and torch.cuda.device_count() >= count else "cpu"
    if devices == "cpu":
        return [torch.device("cpu")] * count, True
    if devices == "cuda":
        if torch.cuda.device_count() < count:
            raise ValueError(f"the placement uses {count} devices; CUDA has {torch.cuda.device_count()}")
        return [torch.device(f"cuda:{i}") for i in range(count)], False
    resolved = [torch.device(d) for d in devices]
    if len(resolved) < count:
        raise ValueError(f"the placement uses {count} devices; {len(resolved)} given")
    cpu = all(d.type == "cpu" for d in resolved)
    if not cpu and len({str(d) for d in resolved}) != len(resolved):
        raise ValueError("accelerator devices must be distinct")
    return resolved, cpu


def _copy_to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device, copy=True)
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_to(v, device) for v in value)
    return value


def _bytes(value):
    return torch_export._tensor_bytes(value)


# ---------------------------------------------------------------------------------------------------
# The placed step


@dataclass
class StepTiming:
    """What one run of a placed step measured."""

    wall_ns: int = 0
    busy_ns: list = field(default_factory=list)  # per device: time spent running nodes (incl. copies)
    cpu_ns: list = field(default_factory=list)  # per device: CPU time of its worker thread
    copies: int = 0  # cross-device copies made
    copy_bytes: int = 0
    op_ns: dict = field(default_factory=dict)  # request op name -> ns of its nodes in this step
    # (node name, device, ready, start, end) in ns from the step's start: when its inputs were done,
    # when its worker took it, when it finished.
    timeline: list = field(default_factory=list)


class _RunState:
    def __init__(self, program, k):
        self.lock = threading.Lock()
        self.ready = [[] for _ in range(k)]
        self.conds = [threading.Condition(self.lock) for _ in range(k)]
        self.pending = list(program.npred)
        self.readers = list(program.readers)
        self.copy_keys = [[] for _ in program.nodes]
        self.remaining = len(program.nodes)
        self.error = None
        self.values = {}
        self.node_ns = [0] * len(program.nodes)
        self.ready_at = [0] * len(program.nodes)
        self.started_at = [0] * len(program.nodes)
        self.busy_ns = [0] * k
        self.cpu_ns = [0] * k
        self.copies = [0] * k
        self.copy_bytes = [0] * k
        self.sleep_ns = None  # rehearsal: sleep this long per node instead of running it


class PlacedStep:
    """One training step with every op on its placed device; `run` executes a step and keeps the
    parameters, optimizer state and buffers on their devices for the next one."""

    def __init__(self, traced, request, placement, devices=None):
        self.traced = traced
        ops = request["graph"]["ops"]
        device_of_op = _placement_devices(placement)
        if len(device_of_op) != len(ops):
            raise ValueError(f"the placement has {len(device_of_op)} devices for {len(ops)} ops")
        k = len(request["cluster"]["devices"])
        if any(not 0 <= d < k for d in device_of_op):
            raise ValueError(f"the placement names a device outside the request's {k} devices")
        self.devices, self.cpu_workers = resolve_devices(k, devices)
        self.k = k
        index_of = {op["name"]: i for i, op in enumerate(ops)}
        op_of = node_ops(traced)
        missing = sorted({name for name in op_of.values() if name not in index_of})
        if missing or len(set(op_of.values())) != len(ops):
            raise ValueError(f"the request does not describe this traced step (unknown ops: {missing[:5]})")
        self.op_of = op_of
        self.device_of = {node: device_of_op[index_of[name]] for node, name in op_of.items()}
        self._compile(request, index_of)
        self._load_state()
        self.last_timing = None

    # -- analysis, once ------------------------------------------------------------------------------

    def _compile(self, request, index_of):
        graph = self.traced.graph_module.graph
        all_nodes = list(graph.nodes)
        self.placeholder_nodes = [n for n in all_nodes if n.op == "placeholder"]
        self.output_node = next(n for n in all_nodes if n.op == "output")
        nodes = [n for n in all_nodes if n.op == "call_function"]
        index = {n: i for i, n in enumerate(nodes)}
        self.nodes, self.index = nodes, index
        preds = [set() for _ in nodes]

        # Storage roots: a view or an in-place op's result shares the storage of what it aliases.
        root, alias_parent = {}, {}
        for n in self.placeholder_nodes:
            root[n] = n
        write_count = {}
        last_writer, readers_since = {}, {}
        forked = {}  # root -> cross-device writer whose copy (not the original) holds the new value
        self.read_version = [dict() for _ in nodes]
        for i, n in enumerate(nodes):
            inputs = torch_export._input_nodes(n)
            for p in inputs:
                if p in index:
                    preds[i].add(index[p])
            written = torch_export._written_arguments(n)
            if torch_export._aliases_an_input(n) and inputs:
                alias_parent[n] = inputs[0]
                root[n] = torch_export._alias_root(n, inputs[0], root)
                continue  # a view reads nothing; its readers read its root
            if written and _returns_alias(n):
                alias_parent[n] = written[0]
                root[n] = root[written[0]]
            else:
                root[n] = n
            reads = {root[p] for p in inputs}
            writes = {root[w] for w in written}
            for p in inputs:
                self.read_version[i][p] = write_count.get(root[p], 0)
                r = root[p]
                if r in forked and not _derives_from(p, forked[r], alias_parent):
                    raise ValueError(
                        f"{n.name} reads {p.name} after {forked[r].name} wrote it in place on another "
                        f"device ({self.device_of[forked[r]]}, not {self.device_of[p]}): place them together")
            for r in reads | writes:
                w = last_writer.get(r)
                if w is not None and w is not n:
                    preds[i].add(index[w])
            for r in writes:
                preds[i].update(index[x] for x in readers_since.get(r, ()) if x is not n)
                last_writer[r] = n
                readers_since[r] = []
                write_count[r] = write_count.get(r, 0) + 1
            for w in written:
                if self.device_of[w] != self.device_of[n]:
                    if isinstance(root[w], torch.fx.Node) and root[w].op == "placeholder":
                        raise ValueError(
                            f"{n.name} writes {self.op_of[root[w]]} in place on device {self.device_of[n]}; "
                            f"it lives on device {self.device_of[root[w]]} (colocate them)")
                    forked[root[w]] = n
            for r in reads - writes:
                readers_since.setdefault(r, []).append(n)
        for i in range(len(nodes)):
            preds[i].discard(i)

        self.succ = [[] for _ in nodes]
        for i, ps in enumerate(preds):
            for p in ps:
                self.succ[p].append(i)
        self.npred = [len(ps) for ps in preds]
        # Data readers of each node (the step's outputs count as one): a value and its copies are
        # dropped after its last reader, as the simulator frees an output after its last consumer.
        self.reads = [sorted({index[q] for q in torch_export._input_nodes(n) if q in index}) for n in nodes]
        kept = set()
        torch.fx.node.map_arg(self.output_node.args, lambda q: kept.add(q))
        self.readers = [len(n.users) + (1 << 30 if n in kept else 0) for n in nodes]
        self.dev = [self.device_of[n] for n in nodes]
        self.inline = [n in alias_parent and not torch_export._written_arguments(n) for n in nodes]
        self.targets = [n.target for n in nodes]
        # Factory ops were traced with `device=cpu`; they create on the device they run on.
        self.device_kwarg = [isinstance(n.kwargs.get("device"), torch.device) for n in nodes]
        self.op_name = [self.op_of[n] for n in nodes]

        # Priorities: bottom levels as the simulator computes them (own time + longest path to the
        # end, a cross-device edge costing its transfer), ties to the smaller op name.
        ops = request["graph"]["ops"]
        cluster = request["cluster"]
        speed = [float(d.get("speed", 1.0) or 1.0) for d in cluster["devices"]]
        link = cluster.get("intra_node", {})
        bandwidth = float(link.get("bandwidth_bytes_per_second", 0) or 0)
        latency = int(link.get("latency_ns", 0) or 0)
        edge_bytes = {(e["src"], e["dst"]): int(e.get("bytes", 0)) for e in request["graph"]["edges"]}
        cost = []
        for n in nodes:
            name = self.op_of[n]
            own = name == n.name  # views cost nothing: their op's time is charged once
            d = self.dev[index[n]]
            cost.append(int(ops[index_of[name]].get("compute_ns", 0)) / speed[d] if own else 0)
        level = [0.0] * len(nodes)
        for i in range(len(nodes) - 1, -1, -1):
            best = 0.0
            src = index_of[self.op_name[i]]
            for s in self.succ[i]:
                comm = 0.0
                if self.dev[s] != self.dev[i]:
                    b = edge_bytes.get((src, index_of[self.op_name[s]]), 0)
                    comm = latency + (b / bandwidth if bandwidth > 0 else 0.0) * 1e9
                best = max(best, comm + level[s])
            level[i] = cost[i] + best
        self.priority = [(-level[i], self.op_name[i], nodes[i].name, i) for i in range(len(nodes))]

    def _load_state(self):
        """Parameters, optimizer state and buffers, copied to the device of their op."""
        self.state = {}
        values = self.traced.initial_values or [tensor for _, _, tensor in self.traced.placeholders]
        for node, tensor in zip(self.placeholder_nodes, values):
            self.state[node] = tensor.detach().to(self.devices[self.device_of[node]], copy=True)
        kinds = [kind for kind, _, _ in self.traced.placeholders]
        self._by_kind = {kind: [n for n, k in zip(self.placeholder_nodes, kinds) if k == kind]
                         for kind in ("param", "buffer", "state", "input")}

    # -- running -------------------------------------------------------------------------------------

    def run(self, inputs, targets=()):
        """Runs one step on the batch (`inputs` as traced, then the loss's `targets`); returns the loss
        (a CPU tensor). The timing is in `last_timing`."""
        batch = list(inputs) + list(targets)
        input_nodes = self._by_kind["input"]
        if len(batch) != len(input_nodes):
            raise ValueError(f"the step takes {len(input_nodes)} inputs and targets; {len(batch)} given")
        state = _RunState(self, self.k)
        for node in self._by_kind["param"] + self._by_kind["buffer"] + self._by_kind["state"]:
            state.values[node] = self.state[node]
        for node, tensor in zip(input_nodes, batch):
            state.values[node] = tensor.to(self.devices[self.device_of[node]])
        self._schedule(state)
        new_params, new_states, loss, _ = self.output_node.args[0]
        self._commit(state, self._by_kind["param"], new_params)
        self._commit(state, self._by_kind["state"], new_states)
        return state.values[loss].detach().to("cpu", copy=True)

    def rehearse(self, costs):
        """Runs the schedule alone: every op sleeps for its cost ({op name: ns}) instead of computing,
        nothing is copied. Sleeping takes no CPU, so this measures the scheduler (dependencies, order,
        hand-offs between workers) against the simulator without the machine's cores in the way.
        Returns the StepTiming (also in `last_timing`); the step's state is untouched."""
        state = _RunState(self, self.k)
        state.sleep_ns = [int(costs.get(name, 0)) if name == node.name else 0
                          for name, node in zip(self.op_name, self.nodes)]
        self._schedule(state)
        return self.last_timing

    def _schedule(self, state):
        for i, p in enumerate(self.priority):
            if state.pending[i] == 0:
                heapq.heappush(state.ready[self.dev[i]], p)
        workers = [threading.Thread(target=self._worker, args=(d, state), name=f"placed-device-{d}", daemon=True)
                   for d in range(self.k)]
        started = time.perf_counter_ns()
        state.ready_at = [started if n == 0 else 0 for n in state.pending]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if not self.cpu_workers:
            for d in self.devices:
                torch.cuda.synchronize(d)
        wall = time.perf_counter_ns() - started
        if state.error is not None:
            raise state.error
        op_ns = {}
        for i, ns in enumerate(state.node_ns):
            op_ns[self.op_name[i]] = op_ns.get(self.op_name[i], 0) + ns
        timeline = [(n.name, self.dev[i], state.ready_at[i] - started, state.started_at[i] - started,
                     state.started_at[i] + state.node_ns[i] - started) for i, n in enumerate(self.nodes)]
        self.last_timing = StepTiming(wall, state.busy_ns, state.cpu_ns, sum(state.copies), sum(state.copy_bytes),
                                      op_ns, timeline)

    def _commit(self, state, placeholder_nodes, outputs):
        for node, out in zip(placeholder_nodes, outputs):
            value = state.values[out]
            home = self.devices[self.device_of[node]]
            if self.device_of.get(out) != self.device_of[node]:
                value = value.to(home, copy=True)  # never happens when updates are colocated
            self.state[node] = value

    def _worker(self, d, state):
        cpu_started = time.thread_time_ns()
        try:
            self._work(d, state)
        finally:
            state.cpu_ns[d] = time.thread_time_ns() - cpu_started

    def _execute(self, i, d, state):
        node, values, device = self.nodes[i], state.values, self.devices[d]
        versions = self.read_version[i]

        def fetch(p):
            value = values[p]
            if self.device_of[p] == d:
                return value
            # A copy per consumer device, reused until the storage is written again.
            key = (p, d, versions.get(p, 0))
            copy = values.get(key)
            if copy is None:
                copy = _copy_to(value, device)
                values[key] = copy
                if p in self.index:
                    state.copy_keys[self.index[p]].append(key)
                state.copies[d] += 1
                state.copy_bytes[d] += _bytes(value)
            return copy

        args = torch.fx.node.map_arg(node.args, fetch)
        kwargs = torch.fx.node.map_arg(node.kwargs, fetch)
        if self.device_kwarg[i]:
            kwargs = dict(kwargs, device=device)
        values[node] = self.targets[i](*args, **kwargs)

    def _work(self, d, state):
        if self.cpu_workers:
            torch.set_num_threads(1)  # one intra-op thread per CPU worker
        else:
            torch.cuda.set_device(self.devices[d])
        torch.set_grad_enabled(False)  # the graph holds the backward ops; nothing to record
        ready, cond, lock = state.ready[d], state.conds[d], state.lock
        clock = time.perf_counter_ns
        sleep_ns, owed = state.sleep_ns, 0
        while True:
            with lock:
                while not ready and state.remaining and state.error is None:
                    cond.wait()
                if not state.remaining or state.error is not None:
                    return
                chain = [heapq.heappop(ready)[3]]
            # A node's views (and getitem, detach) run right after it, on its worker: the simulator
            # sends an op's output the moment the op ends, so its readers elsewhere must not wait
            # behind another op for a view of it.
            while chain:
                i = chain.pop()
                began = clock()
                try:
                    if sleep_ns is None:
                        self._execute(i, d, state)
                    else:
                        # time.sleep overshoots short waits by tens of us: the next sleeps pay it back.
                        want = sleep_ns[i] - owed
                        if want > 0:
                            time.sleep(want / 1e9)
                        owed = max(0, owed + (clock() - began) - sleep_ns[i])
                except BaseException as error:  # noqa: BLE001 - handed to the caller of run()
                    with lock:
                        state.error = error
                        for c in state.conds:
                            c.notify_all()
                    return
                done = []
                with lock:
                    state.remaining -= 1
                    now = clock()
                    for q in self.reads[i]:
                        state.readers[q] -= 1
                        if not state.readers[q]:
                            done.append(q)
                    for s in self.succ[i]:
                        state.pending[s] -= 1
                        if state.pending[s] == 0:
                            state.ready_at[s] = now
                            if self.inline[s] and self.dev[s] == d:
                                chain.append(s)
                            else:
                                heapq.heappush(state.ready[self.dev[s]], self.priority[s])
                                state.conds[self.dev[s]].notify()
                    if not state.remaining:
                        for c in state.conds:
                            c.notify_all()
                for q in done:
                    state.values.pop(self.nodes[q], None)
                    for key in state.copy_keys[q]:
                        state.values.pop(key, None)
                spent = clock() - began
                state.node_ns[i] = spent
                state.started_at[i] = began
                state.busy_ns[d] += spent

    # -- results -------------------------------------------------------------------------------------

    def parameters(self):
        """{parameter name: tensor on its device}."""
        return dict(zip(self.traced.names("param"), (self.state[n] for n in self._by_kind["param"])))

    def buffers(self):
        return dict(zip(self.traced.names("buffer"), (self.state[n] for n in self._by_kind["buffer"])))

    def optimizer_state(self):
        """[(parameter name, tensor)] in the traced order (SGD: momentum; Adam: first, second moment)."""
        return list(zip(self.traced.names("state"), (self.state[n] for n in self._by_kind["state"])))


def _returns_alias(node):
    schema = getattr(node.target, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


def _derives_from(node, writer, alias_parent):
    """True when `node` aliases `writer`'s result (directly or through views and later writes)."""
    while node is not None:
        if node is writer:
            return True
        node = alias_parent.get(node)
    return False


class UnplacedStep:
    """The reference: the traced graph called as one function on one thread, same state handling."""

    def __init__(self, traced):
        self.traced = traced
        self.params = [t.detach().clone() for t in traced.initial("param")]
        self.buffers_ = [t.detach().clone() for t in traced.initial("buffer")]
        self.states = [t.detach().clone() for t in traced.initial("state")]

    def run(self, inputs, targets=()):
        with torch.no_grad():
            new_params, new_states, loss, _ = self.traced.graph_module(
                *self.params, *self.buffers_, *self.states, *inputs, *targets)
        self.params, self.states = list(new_params), list(new_states)
        return loss.detach().clone()

    def parameters(self):
        return dict(zip(self.traced.names("param"), self.params))

    def buffers(self):
        return dict(zip(self.traced.names("buffer"), self.buffers_))


# ---------------------------------------------------------------------------------------------------
# Costs measured on this machine


def profile_costs(traced, request, inputs, targets=(), runs=5, warmup=1):
    """{op name: mean ns} of each op run by PlacedStep on one CPU worker with one intra-op thread
    (views charged to the op they alias), over `runs` steps after `warmup`. The mean, not the median:
    on a shared machine a few ops of every step are preempted, and per-op medians leave that out, so
    their sum fell 15-20 % short of a typical step."""
    single = PlacedStep(traced, request, [0] * len(request["graph"]["ops"]), devices="cpu")
    samples = {}
    for run in range(warmup + runs):
        single.run(inputs, targets)
        if run >= warmup:
            for name, ns in single.last_timing.op_ns.items():
                samples.setdefault(name, []).append(ns)
    return {name: int(statistics.fmean(values)) for name, values in samples.items()}


def measure_link(sizes=(1 << 12, 1 << 22), repeats=30):
    """(latency ns, bytes per second) of a copy between CPU workers (a clone), fitted on two sizes."""
    torch.set_num_threads(1)
    times = []
    for size in sizes:
        tensor = torch.ones(size // 4)
        tensor.clone()
        samples = []
        for _ in range(repeats):
            began = time.perf_counter_ns()
            tensor.to("cpu", copy=True)
            samples.append(time.perf_counter_ns() - began)
        times.append(statistics.median(samples))
    (s0, s1), (t0, t1) = sizes, times
    bandwidth = (s1 - s0) / max(t1 - t0, 1) * 1e9
    latency = max(0, int(t0 - s0 / bandwidth * 1e9))
    return latency, bandwidth


def with_costs(request, costs, link=None, devices=None):
    """A copy of the request with compute_ns from `costs` ({op name: ns}), the intra-node link from
    `link` ((latency ns, bytes/s)) and `devices` devices (the first device repeated)."""
    request = json.loads(json.dumps(request))
    for op in request["graph"]["ops"]:
        if op["name"] in costs:  # views of a parameter (its transpose, detach) are its op's time
            op["compute_ns"] = str(max(1, int(costs[op["name"]])))
    if link is not None:
        latency, bandwidth = link
        request["cluster"]["intra_node"] = {"bandwidth_bytes_per_second": str(int(bandwidth)),
                                            "latency_ns": str(int(latency))}
    if devices is not None:
        template = request["cluster"]["devices"][0]
        kind = template.get("kind", "cpu")
        request["cluster"]["devices"] = [dict(template, name=f"{kind}{i}") for i in range(devices)]
    return request


# ---------------------------------------------------------------------------------------------------
# Placing


def place_offline(binary, request, algorithm="", time_limit_s=60):
    """Places `request` with `placement_offline place`; returns the Placement as a dict (protobuf JSON)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "request.json"
        torch_export.write_request(request, path)
        args = [str(binary), "place", f"--request={path}", f"--time_limit_s={time_limit_s}"]
        if algorithm:
            args.append(f"--algorithm={algorithm}")
        completed = subprocess.run(args, capture_output=True, text=True, timeout=time_limit_s + 120)
    if completed.returncode != 0:
        raise RuntimeError(f"placement_offline failed: {completed.stderr.strip()}")
    return json.loads(completed.stdout)


def evaluate_offline(binary, request, placement):
    """Simulates `placement` (device per op) for `request` with `placement_offline evaluate`; returns the
    Placement dict with its metrics."""
    with tempfile.TemporaryDirectory() as folder:
        request_path, placement_path = Path(folder) / "request.json", Path(folder) / "placement.json"
        torch_export.write_request(request, request_path)
        placement_path.write_text(json.dumps({"device": _placement_devices(placement)}))
        completed = subprocess.run([str(binary), "evaluate", f"--request={request_path}",
                                    f"--placement={placement_path}"], capture_output=True, text=True, timeout=120)
    if completed.returncode != 0:
        raise RuntimeError(f"placement_offline evaluate failed: {completed.stderr.strip()}")
    return json.loads(completed.stdout)["placement"]


def place_server(address, request, algorithm=""):
    """Places `request` on a running placement_server; returns the Placement as a dict."""
    from google.protobuf import json_format

    from placement.client import PlacementClient
    from placement.v1 import placement_pb2

    message = json_format.ParseDict(request, placement_pb2.PlaceRequest())
    with PlacementClient(address) as client:
        result = client.place(message, algorithm=algorithm or None)
    return json_format.MessageToDict(result.proto, preserving_proto_field_name=True)


def makespan_ns(placement):
    return int(placement.get("metrics", {}).get("makespan_ns", 0))


# ---------------------------------------------------------------------------------------------------
# Measuring


def late_starts_ns(timing, devices):
    """Per device, the time its worker sat idle while one of its nodes was ready (wake-up and
    scheduling latency: what the simulator, starting an op the moment it is ready, does not have)."""
    late = [0] * devices
    by_device = sorted((d, start, ready, end) for _, d, ready, start, end in timing.timeline)
    previous_end = {}
    for d, start, ready, end in by_device:
        late[d] += max(0, start - max(ready, previous_end.get(d, 0)))
        previous_end[d] = end
    return late


def reality_check(traced, inputs, targets, place, devices=(1, 2), profile_runs=5, steps=5, warmup=1,
                  evaluate=None):
    """Profiles the ops (one CPU worker), places the profiled request on K devices for each K in
    `devices` (`place(request) -> Placement dict`) and runs each placement on K CPU workers, the K
    settings taking turns step by step so that a change in the machine's load hits all of them alike.
    Returns one dict per K: simulated and median measured step time (ns), busy time per worker, copies;
    with `evaluate(request, placement) -> Placement dict` also `replayed_ns`, the simulated time of the
    same placement with the op times the run really took (per op, the mean over the steps), and
    `rehearsed_ns`, the placed schedule run with every op sleeping for its profiled cost (see
    PlacedStep.rehearse), and when K = 1 is among `devices`, `resimulated_ns`: the placement simulated
    with the op times of the K = 1 steps, a profile taken in the same minutes as the measurement (the
    load of a shared machine changes between a profile and a later run). Every figure is a median over
    the `steps` measured steps."""
    base = traced.request(devices=1, device_kind="cpu")
    costs = profile_costs(traced, base, inputs, targets, runs=profile_runs, warmup=warmup)
    link = measure_link()
    runs = []
    for k in devices:
        request = with_costs(base, costs, link, devices=k)
        placement = place(request)
        runs.append((k, request, placement, PlacedStep(traced, request, placement, devices="cpu"), []))
    for round_ in range(warmup + steps):
        for _, _, _, step, timings in runs:
            step.run(inputs, targets)
            if round_ >= warmup:
                timings.append(step.last_timing)
    single = next((timings for k, _, _, _, timings in runs if k == 1), None)
    concurrent = ({name: int(statistics.fmean(t.op_ns[name] for t in single)) for name in single[0].op_ns}
                  if single and evaluate else None)
    rows = []
    for k, request, placement, step, timings in runs:
        def median(get, of=timings):
            return int(statistics.median(get(t) for t in of))

        rehearsed = median(lambda t: t.wall_ns, [step.rehearse(costs) for _ in range(steps)])

        op_ns = {name: int(statistics.fmean(t.op_ns[name] for t in timings)) for name in timings[0].op_ns}
        replayed = makespan_ns(evaluate(with_costs(request, op_ns), placement)) if evaluate else 0
        resimulated = makespan_ns(evaluate(with_costs(request, concurrent), placement)) if concurrent else 0
        rows.append({"devices": k, "used": len(set(placement["device"])), "simulated_ns": makespan_ns(placement),
                     "measured_ns": median(lambda t: t.wall_ns), "replayed_ns": replayed,
                     "rehearsed_ns": rehearsed, "resimulated_ns": resimulated,
                     "busy_ns": [median(lambda t: t.busy_ns[d]) for d in range(k)],
                     "cpu_ns": [median(lambda t: t.cpu_ns[d]) for d in range(k)],
                     "late_ns": [median(lambda t: late_starts_ns(t, k)[d]) for d in range(k)],
                     "copies": timings[-1].copies, "copy_bytes": timings[-1].copy_bytes,
                     "algorithm": placement.get("provenance", {}).get("algorithm", ""),
                     "total_cost_ns": sum(int(op.get("compute_ns", 0)) for op in request["graph"]["ops"]),
                     "link": link})
    return rows


# ---------------------------------------------------------------------------------------------------
# Command line


def _parser():
    parser = argparse.ArgumentParser(
        prog="python3 -m placement.torch_run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a placed PyTorch training step (a training plan of api.md 2.1) for real, one process per "
                    "device.",
        epilog="""launching:
  python3 -m placement.torch_run --devices=N ...   starts the N processes itself on this host (torch's
                                                   launcher environment: MASTER_ADDR/PORT, RANK, WORLD_SIZE)
  torchrun --nproc_per_node=N -m placement.torch_run --devices=N ...
                                                   or under torchrun (several hosts: its --nnodes, --rdzv_*);
                                                   rank 0 places the step and shares the plan
  gloo on CPU; NCCL when every process has a CUDA device (cuda:LOCAL_RANK).

examples:
  python3 -m placement.torch_run --model=transformer --batch=8 --devices=2 --microbatches=4 \\
      --offline=build/service/offline/placement_offline --algorithm=auto --calibrate --check
  python3 -m placement.torch_run --model=cnn --devices=2 --data_parallel=2 --request=r.json --placement=p.json
  python3 -m placement.torch_run --model=transformer --devices=2 --in_process --profile ...   (one process,
      a thread per device: the rehearsal interpreter)""")
    parser.add_argument("--model", required=True, help="as torch_export: torchvision:NAME, cnn, transformer, "
                                                       "module:factory")
    parser.add_argument("--batch", type=int, default=8, help="samples per replica group and step")
    parser.add_argument("--image_size", type=int, default=64)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--width", type=int, default=16, help="cnn")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d_model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--optimizer", choices=sorted(torch_export.OPTIMIZER_STATE_COPIES), default="sgd")
    parser.add_argument("--devices", type=int, default=2, help="devices of the cluster = processes to run")
    parser.add_argument("--microbatches", type=int, default=None, metavar="M", help="microbatches per step")
    parser.add_argument("--max_in_flight", type=int, default=None, metavar="W", help="0 = the solver chooses")
    parser.add_argument("--data_parallel", type=int, default=None, metavar="D", help="0 = the solver chooses")
    parser.add_argument("--offline", help="placement_offline binary to place with")
    parser.add_argument("--server", help="or a placement_server address")
    parser.add_argument("--algorithm", default="", help="placement algorithm (default: the placer's)")
    parser.add_argument("--request", help="or run this request (as exported for this step) ...")
    parser.add_argument("--placement", help="... with this placement (Placement JSON, e.g. placementctl's)")
    parser.add_argument("--calibrate", action="store_true",
                        help="measure op costs and the link on this machine before placing (placement.calibrate)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--check", action="store_true",
                        help="compare loss and parameters with the unplaced step over the whole batch "
                             "(rtol 1e-4, atol 1e-5; exit status 1 when they differ, unless the step draws "
                             "random numbers or normalises per microbatch or replica: then it says so)")
    parser.add_argument("--backend", choices=("gloo", "nccl"), default=None, help="default: nccl with CUDA")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per process (CPU)")
    parser.add_argument("--transport", choices=("shm", "gloo"), default=None,
                        help="messages between processes of this host on CPU: shared memory (the default "
                             "where /dev/shm has room) or gloo's send and receive")
    parser.add_argument("--module_split", metavar="FILE",
                        help="also write the plan as module-level split points (JSON), when it is one")
    parser.add_argument("--in_process", action="store_true",
                        help="run in this process, a thread per device (placement.torch_run.PlacedStep)")
    parser.add_argument("--profile", type=int, nargs="?", const=5, default=0, metavar="RUNS",
                        help="(in process) profile op times and report simulated vs measured for K=1 and "
                             "K=--devices")
    parser.add_argument("--run_on", default=None, help="(in process) cpu, cuda or a comma list")
    return parser


def main(argv=None):
    import os
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.in_process or args.profile:
        return _main_in_process(args)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return _main_rank(args)
    # Not started by a launcher: start one process per device here; rank 0 places (and calibrates).
    from placement import torch_dist

    torch_dist.launch_local(args.devices, ["-m", "placement.torch_run", *argv], stdout=sys.stdout)


def _model(args, batch=None):
    copy = argparse.Namespace(**vars(args))
    if batch is not None:
        copy.batch = batch
    return torch_export.builtin_model(args.model, copy)


def _microbatch_trace(args):
    model, inputs, loss_fn, targets = _model(args)
    m = args.microbatches or 1
    if args.batch % m:
        raise SystemExit(f"--batch {args.batch} is not divisible by --microbatches {m}")
    micro = torch_export.split_microbatch(tuple(inputs), tuple(targets), m) if m > 1 else (tuple(inputs), tuple(targets))
    return model, trace(model, micro[0], loss_fn, args.optimizer, micro[1], microbatches=m), inputs, targets


def prepare_plan(args, link=None, traced_step=None, ring_link=None):
    """(request dict, placement dict) for the command line's step: exported (with --calibrate, costed
    with this machine's op times, `link` and, for replica groups, the all-reduce's `ring_link`, each
    (latency ns, bytes/s)) and placed by --offline / --server, or read from --request / --placement."""
    if args.request and args.placement:
        from placement import calibrate

        return calibrate._read_request(args.request), json.loads(Path(args.placement).read_text())
    _, traced, inputs, targets = traced_step or _microbatch_trace(args)
    plan = {name: getattr(args, name) for name in ("microbatches", "max_in_flight", "data_parallel")
            if getattr(args, name) is not None}
    kind = "cuda" if (args.backend == "nccl" or (args.backend is None and torch.cuda.is_available()
                                                  and torch.cuda.device_count() >= args.devices)) else "cpu"
    request = traced.request(devices=args.devices, device_kind=kind, **plan)
    if args.request:
        from placement import calibrate

        request = calibrate._read_request(args.request)
    if args.calibrate:
        from placement import calibrate

        torch.set_num_threads(args.threads)
        costs = calibrate.measure_op_costs(traced, inputs, targets, device=kind)
        request = calibrate.recost(request, costs, link, ring_link=ring_link)
    if args.placement:
        return request, json.loads(Path(args.placement).read_text())
    if args.offline:
        return request, place_offline(args.offline, request, args.algorithm)
    if args.server:
        return request, place_server(args.server, request, args.algorithm)
    raise SystemExit("--offline=BINARY, --server=ADDRESS or --placement=FILE says where the placement comes from")


def _main_rank(args):
    """One process of the run (started by the parent or by torchrun)."""
    import torch.distributed as dist

    from placement import module_split, torch_dist

    torch.set_num_threads(args.threads)
    rank, world = torch_dist.init_from_environment(args.backend)
    traced_step = _microbatch_trace(args)
    model, traced = traced_step[:2]
    if args.request and args.placement:
        request, placement = prepare_plan(args)
    else:  # rank 0 places (after the ranks measured their link), the others wait for its plan
        link = ring_link = None
        if args.calibrate and world > 1:
            from placement import calibrate

            device = "cuda" if dist.get_backend() == "nccl" else "cpu"
            link = calibrate.measure_link(device=device, transport=args.transport)
            ring_link = calibrate.measure_all_reduce(device=device, transport=args.transport)
        shared = [prepare_plan(args, link, traced_step, ring_link) if rank == 0 else None]
        dist.broadcast_object_list(shared, src=0)
        request, placement = shared[0]
    if len(request["cluster"]["devices"]) > world:
        raise SystemExit(f"the plan's cluster has {len(request['cluster']['devices'])} devices; {world} processes run")
    replicas = int((placement.get("plan") or {}).get("data_parallel") or 1)
    _, inputs, _, targets = _model(args, batch=args.batch * replicas)
    step = torch_dist.DistributedStep(traced, request, placement, transport=args.transport)
    reference = None
    if args.check and rank == 0:
        full = trace(model, tuple(inputs), _model(args)[2], args.optimizer, tuple(targets))
        reference = UnplacedStep(full)
    simulated = makespan_ns(placement)
    plan = placement.get("plan") or {}
    if rank == 0:
        print(f"{world} processes ({dist.get_backend()}; messages: {step.transport}), plan: {plan.get('microbatches', 1)} microbatches, "
              f"{plan.get('max_in_flight', 1)} in flight, {replicas} replica group(s) of "
              f"{step.program.group_size} devices; simulated step {simulated / 1e6:.2f} ms", flush=True)
        if args.module_split:
            try:
                split = module_split.module_split(traced, request, placement)
                Path(args.module_split).write_text(json.dumps(split, indent=1))
                print(f"module split points: {split['split_points']} -> {args.module_split}", flush=True)
            except module_split.NotModuleLevel as reason:
                print(f"not written as module split points: {reason}", flush=True)
    losses, failed = [], False  # (placed, unplaced) loss per step, with --check
    for i in range(args.steps):
        loss = step.run(tuple(inputs), tuple(targets))
        timing = step.last_timing
        if reference is not None:
            losses.append((loss, reference.run(tuple(inputs), tuple(targets))))
        if rank == 0:
            print(f"step {i}: loss {float(loss):.6f}, {timing.step_ns / 1e6:.1f} ms (simulated "
                  f"{simulated / 1e6:.1f} ms), {timing.messages_sent} messages sent by rank 0", flush=True)
    parts = [None] * world if rank == 0 else None
    timing = step.last_timing
    mine = (len(timing.instances), timing.kernel_ns, timing.overhead_ns, timing.wait_ns)
    dist.gather_object(mine, parts, dst=0)
    state = step.gather_state() if args.check else None
    if rank == 0:
        for r, (count, kernel, overhead, wait) in enumerate(parts):
            if count:
                print(f"rank {r}: {count} instances, ops {kernel / 1e6:.1f} ms, runner overhead "
                      f"{overhead / 1e6:.1f} ms ({overhead / count / 1e3:.1f} us an op), waiting {wait / 1e6:.1f} ms")
        if reference is not None:
            params = reference.parameters()
            worst = max(float((state["param"][name] - value).abs().max()) for name, value in params.items())
            close = all(abs(float(got) - float(expected)) <= CHECK_ATOL + CHECK_RTOL * abs(float(expected))
                        for got, expected in losses) and all(
                torch.allclose(state["param"][name], value, rtol=CHECK_RTOL, atol=CHECK_ATOL)
                for name, value in params.items())
            gap = max(abs(float(got) - float(expected)) for got, expected in losses)
            figures = f"loss within {gap:.2e}, parameters within {worst:.2e}"
            reasons = not_comparable(traced, plan.get("microbatches", 1), replicas)
            if close:
                print(f"same as unplaced (rtol {CHECK_RTOL:g}, atol {CHECK_ATOL:g}): {figures}")
            elif reasons:
                print(f"not comparable with the unplaced step ({'; '.join(reasons)}): {figures}")
            else:
                print(f"DIFFERS from the unplaced step beyond rtol {CHECK_RTOL:g}, atol {CHECK_ATOL:g}: {figures}")
                failed = True
    dist.destroy_process_group()
    if failed:
        raise SystemExit(1)


def _main_in_process(args):
    model, inputs, loss_fn, targets = torch_export.builtin_model(args.model, args)
    traced = trace(model, inputs, loss_fn, args.optimizer, targets)

    def place(request):
        if args.offline:
            return place_offline(args.offline, request, args.algorithm)
        if args.server:
            return place_server(args.server, request, args.algorithm)
        raise SystemExit("--offline=BINARY or --server=ADDRESS (or --placement=FILE without --profile)")

    if args.profile:
        evaluate = (lambda r, p: evaluate_offline(args.offline, r, p)) if args.offline else None
        rows = reality_check(traced, inputs, targets, place, devices=sorted({1, args.devices}),
                             profile_runs=args.profile, steps=args.steps, evaluate=evaluate)
        print(format_table(rows, args.model))
        return
    request = traced.request(devices=args.devices)
    placement = json.loads(Path(args.placement).read_text()) if args.placement else place(request)
    run_on = args.run_on.split(",") if args.run_on and "," in args.run_on else args.run_on
    step = PlacedStep(traced, request, placement, devices=run_on)
    for i in range(args.steps):
        loss = step.run(inputs, targets)
        timing = step.last_timing
        print(f"step {i}: loss {float(loss):.6f}, {timing.wall_ns / 1e6:.1f} ms, {timing.copies} copies "
              f"({timing.copy_bytes} bytes)")


def format_table(rows, model):
    """Markdown rows: K, simulated, measured, their ratio, simulated and measured speed-up over K=1, the
    replay (simulated with the op times measured in the run; 0 when not evaluated) and the rehearsal
    (the schedule run with sleeping ops)."""
    base = next((r for r in rows if r["devices"] == 1), rows[0])
    lines = ["| model | K | devices used | simulated ms | measured ms | measured / simulated | "
             "simulated speed-up | measured speed-up | copies | replayed ms | rehearsed ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {model} | {r['devices']} | {r['used']} | {r['simulated_ns'] / 1e6:.1f} | {r['measured_ns'] / 1e6:.1f} "
            f"| {r['measured_ns'] / max(r['simulated_ns'], 1):.2f} "
            f"| {base['simulated_ns'] / max(r['simulated_ns'], 1):.2f}x "
            f"| {base['measured_ns'] / max(r['measured_ns'], 1):.2f}x | {r['copies']} "
            f"| {r.get('replayed_ns', 0) / 1e6:.1f} | {r.get('rehearsed_ns', 0) / 1e6:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
