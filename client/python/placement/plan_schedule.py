"""The schedule of a placed training plan (api.md sections 2 and 2.1), computed in Python.

    schedule = plan_schedule.simulate(request, placement)    # request: PlaceRequest dict; placement: its
    schedule.makespan_ns                                      # answer (dict) or (device list, plan)
    schedule.order[d]          # [(op index, microbatch)] in the order device d runs them (-1: a once op)
    schedule.transfers         # Transfer(op, microbatch, kind, source, destination, departure_ns, bytes)
    schedule.all_reduces[d]    # gradient producers of device d in the order their ring all-reduces run

placement.torch_dist runs a plan across processes in exactly this order: every device its instances in
the order the simulator starts them, every pair of processes its messages in the order they leave
(which is what NCCL's point-to-point calls need, and what makes the run deadlock-free). The service's
simulator (service/engine/sim) is the judge of placements; this is the same event-driven list schedule
without the memory accounting, so that a runner needs no binary and no server to know its order.
python_plan_schedule_test holds its makespan against placement_offline's to the nanosecond.

The rules, in short (api.md has them in full): an instance (op, microbatch) becomes ready when its
inputs have arrived; every device runs the most urgent ready instance (lowest microbatch, a once op
counting as -1 before any microbatch and M after, then the highest bottom level, then the smaller
name); a transfer of max(edge bytes into the destination) leaves when its producer finishes and takes
latency + bytes / bandwidth; a gradient (a per-microbatch op feeding a once op) is summed over the
microbatches and leaves after the last copy, or after its ring all-reduce when D > 1; no instance of
microbatch m starts before microbatch m - W has finished everywhere.
"""
import heapq
import math
from dataclasses import dataclass, field

PER_COPY, GRADIENT, ONCE = "per_copy", "gradient", "once"


@dataclass(frozen=True)
class Transfer:
    """One transfer of the unrolled step: `op`'s output (copy `microbatch`, -1 for a once op or an
    accumulated gradient) from device `source` to `destination`, leaving at `departure_ns`."""

    op: int
    microbatch: int
    kind: str  # PER_COPY, GRADIENT or ONCE
    source: int
    destination: int
    departure_ns: int
    arrival_ns: int
    bytes: int
    # The event of the simulation that sent it (a finish or an all-reduce's end), in processing order:
    # a causal order (whatever a transfer waited for was processed before it), unlike departure times,
    # which tie under zero-time ops.
    event: int = 0


@dataclass
class Schedule:
    makespan_ns: int = 0
    microbatches: int = 1
    max_in_flight: int = 1
    data_parallel: int = 1
    start_ns: dict = field(default_factory=dict)  # (op, microbatch) -> start (a once op: microbatch -1)
    finish_ns: dict = field(default_factory=dict)
    finish_event: dict = field(default_factory=dict)  # (op, microbatch) -> event number of its finish
    order: list = field(default_factory=list)  # per device of group 0: [(op, microbatch)] in start order
    transfers: list = field(default_factory=list)  # Transfer, in the order the simulation sent them
    all_reduces: list = field(default_factory=list)  # per device: [op] in the order they run
    all_reduce_ns: dict = field(default_factory=dict)  # op -> (start, end)
    microbatch_done_ns: list = field(default_factory=list)  # per microbatch: when its last op finished
    once: list = field(default_factory=list)  # per op: runs once per step
    gradient_producer: list = field(default_factory=list)  # per op
    device: list = field(default_factory=list)  # per op: device of group 0
    bottom_level_ns: list = field(default_factory=list)  # per op (api.md section 2, this placement)


def _int(value, default=0):
    return int(value) if value not in (None, "") else default


def link_between(cluster, a, b):
    """(bandwidth bytes/s, latency ns) between devices a and b: a `links` entry for the pair, else
    intra_node on one host, inter_node across hosts."""
    devices = cluster["devices"]
    names = (devices[a]["name"], devices[b]["name"])
    for link in cluster.get("links", ()):
        if (link.get("a"), link.get("b")) in (names, names[::-1]):
            spec = link.get("spec", {})
            return _int(spec.get("bandwidth_bytes_per_second")), _int(spec.get("latency_ns"))
    same = devices[a].get("node", "") == devices[b].get("node", "")
    spec = cluster.get("intra_node" if same else "inter_node", {})
    return _int(spec.get("bandwidth_bytes_per_second")), _int(spec.get("latency_ns"))


def transfer_ns(link, size):
    """latency + round(bytes * 1e9 / bandwidth), halves up (model.h's TransferDurationNs)."""
    bandwidth, latency = link
    if size and bandwidth <= 0:
        raise ValueError("a link without bandwidth carries bytes")
    return latency + ((size * 1_000_000_000 + bandwidth // 2) // bandwidth if bandwidth > 0 else 0)


def all_reduce_ns(link, replicas, size):
    """A ring all-reduce: round(2(D-1)/D * bytes / bandwidth) + 2(D-1) * latency (api.md section 2.1)."""
    bandwidth, latency = link
    steps = 2 * (replicas - 1)
    denominator = replicas * bandwidth
    return (steps * size * 1_000_000_000 + denominator // 2) // denominator + steps * latency


def ring_of(devices, replicas, d):
    """The ring of device d of replica group 0 (api.md section 2.1): d, d + N/D, ..., d + (D-1) N/D among N
    devices in D groups; its links join each member to the next and the last back to d."""
    group = devices // replicas
    return [d + g * group for g in range(replicas)]


def op_time_ns(compute_ns, speed):
    """round(compute / speed), halves away from zero (std::llround); speed 1 is exact."""
    if speed == 1.0:
        return compute_ns
    return int(math.floor(compute_ns / speed + 0.5))


def _plan_of(request, placement):
    options = request.get("options", {})
    if isinstance(placement, dict):
        devices = [int(d) for d in placement["device"]]
        plan = placement.get("plan") or {}
    else:
        devices, plan = placement
        plan = dict(plan or {})
    m = max(1, _int(plan.get("microbatches"), _int(options.get("microbatches"), 1)))
    w = _int(plan.get("max_in_flight"), _int(options.get("max_in_flight"), 0)) or m
    d = max(1, _int(plan.get("data_parallel"), _int(options.get("data_parallel"), 1)))
    return devices, m, min(w, m), d


def simulate(request, placement):
    """The schedule of `placement` for `request` (api.md 2.1). `placement` is a Placement dict (its
    `device` and `plan`) or a pair (device per op, {"microbatches", "max_in_flight", "data_parallel"});
    a plan left out is the request's options. Memory is not simulated."""
    graph, cluster = request["graph"], request["cluster"]
    ops = graph["ops"]
    n = len(ops)
    device, m_count, window, replicas = _plan_of(request, placement)
    if len(device) != n:
        raise ValueError(f"the placement has {len(device)} devices for {n} ops")
    all_devices = len(cluster["devices"])
    if all_devices % replicas:
        raise ValueError(f"data_parallel {replicas} does not divide {all_devices} devices")
    group = all_devices // replicas
    if any(not 0 <= d < group for d in device):
        raise ValueError(f"a device index is outside replica group 0 (devices 0..{group - 1})")
    names = [op["name"] for op in ops]
    name_rank = {name: r for r, name in enumerate(sorted(names, key=lambda s: s.encode()))}
    speed = [float(d.get("speed") or 1.0) for d in cluster["devices"]]
    duration = [op_time_ns(_int(op.get("compute_ns")), speed[device[i]]) for i, op in enumerate(ops)]
    once = [bool(op.get("once_per_step")) for op in ops]
    has_once = any(once)

    merged = {}
    for e in graph.get("edges", ()):
        key = (int(e.get("src", 0)), int(e.get("dst", 0)))
        merged[key] = merged.get(key, 0) + _int(e.get("bytes"))
    out = [[] for _ in range(n)]
    indegree = [0] * n
    for (s, t), size in sorted(merged.items()):
        out[s].append((t, size))
        indegree[t] += 1
    # A topological order, ties by name (as the service's depth renumbering; any order works here).
    topo, heap, left = [], [(name_rank[names[i]], i) for i in range(n) if indegree[i] == 0], list(indegree)
    heapq.heapify(heap)
    while heap:
        _, u = heapq.heappop(heap)
        topo.append(u)
        for v, _ in out[u]:
            left[v] -= 1
            if left[v] == 0:
                heapq.heappush(heap, (name_rank[names[v]], v))
    if len(topo) != n:
        raise ValueError("the graph has a cycle")

    links = {}

    def link(a, b):
        if (a, b) not in links:
            links[(a, b)] = link_between(cluster, a, b)
        return links[(a, b)]

    # Once classes and gradient producers.
    after = [False] * n
    preds = [[] for _ in range(n)]
    for u in range(n):
        for v, _ in out[u]:
            preds[v].append(u)
    for u in topo:
        after[u] = not once[u] or any(after[p] for p in preds[u])
    once_class = [(m_count if after[u] else -1) if once[u] else 0 for u in range(n)]
    gradient = [has_once and not once[u] and any(once[v] for v, _ in out[u]) for u in range(n)]

    # Transfers of each op: per destination device, the largest edge into it (by consumer role).
    per_copy_to, gradient_to, edge_cost = [dict() for _ in range(n)], [dict() for _ in range(n)], {}
    for u in range(n):
        a = device[u]
        for v, size in out[u]:
            b = device[v]
            if b == a:
                continue
            target = gradient_to[u] if has_once and not once[u] and once[v] else per_copy_to[u]
            target[b] = max(target.get(b, 0), size)
    for u in range(n):
        for v, _ in out[u]:
            b = device[v]
            if b != device[u]:
                size = max(per_copy_to[u].get(b, -1), gradient_to[u].get(b, -1))
                edge_cost[(u, v)] = transfer_ns(link(device[u], b), size)

    def arrival_delay(u, v):
        b = device[v]
        if b == device[u]:
            return 0
        table = gradient_to[u] if has_once and not once[u] and once[v] else per_copy_to[u]
        return transfer_ns(link(device[u], b), table[b])

    level = [0] * n
    for u in reversed(topo):
        level[u] = duration[u] + max((level[v] + edge_cost.get((u, v), 0) for v, _ in out[u]), default=0)

    ring_link = {}
    if replicas > 1:
        for d in range(group):
            ring = ring_of(group * replicas, replicas, d)
            pairs = [link(ring[i], ring[(i + 1) % replicas]) for i in range(replicas)]
            ring_link[d] = min(pairs, key=lambda bl: (bl[0], -bl[1]))
    reduce_bytes = [max((size for v, size in out[u] if once[v]), default=0) if gradient[u] else 0
                    for u in range(n)]

    s = Schedule(microbatches=m_count, max_in_flight=window, data_parallel=replicas, once=once,
                 gradient_producer=gradient, device=device, bottom_level_ns=level)
    s.order = [[] for _ in range(group)]
    s.all_reduces = [[] for _ in range(group)]
    per_microbatch_ops = n - sum(once)
    microbatch_left = [per_microbatch_ops] * m_count
    done = [-1 if per_microbatch_ops else 0] * m_count
    gated = [[] for _ in range(m_count)]
    copies_left = [m_count] * n
    pending, ready_time = {}, {}
    for m in range(m_count):
        for u in range(n):
            if m == 0 or not once[u]:
                pending[(u, m)] = len(preds[u])
                ready_time[(u, m)] = 0
    ready = [[] for _ in range(group)]
    ring_ready = [[] for _ in range(group)]
    busy, ring_busy = [False] * group, [False] * group
    events, counter, processed = [], [0], [0]

    def push_event(time, kind, payload):
        counter[0] += 1
        heapq.heappush(events, (time, counter[0], kind, payload))

    def enqueue(u, m, klass):
        heapq.heappush(ready[device[u]], (klass, -level[u], name_rank[names[u]], u, m))

    def make_ready(u, m):
        if once[u]:
            enqueue(u, 0, once_class[u])
        elif m_count > 1 and m >= window and done[m - window] < 0:
            gated[m - window].append(u)
        else:
            enqueue(u, m, m)

    def input_known(u, m, arrival, now):
        key = (u, m)
        ready_time[key] = max(ready_time[key], arrival)
        pending[key] -= 1
        if pending[key] == 0:
            if ready_time[key] <= now:
                make_ready(u, m)
            else:
                push_event(ready_time[key], "ready", key)

    def release_gradient(u, now):
        for b, size in sorted(gradient_to[u].items()):
            s.transfers.append(Transfer(u, -1, GRADIENT, device[u], b, now,
                                        now + transfer_ns(link(device[u], b), size), size, processed[0]))
        for v, _ in out[u]:
            if once[v]:
                input_known(v, 0, now + arrival_delay(u, v), now)

    def finish(u, m, now):
        a = device[u]
        busy[a] = False
        s.makespan_ns = now
        s.finish_event[(u, -1 if once[u] else m)] = processed[0]
        if once[u]:
            for b, size in sorted(per_copy_to[u].items()):
                s.transfers.append(Transfer(u, -1, ONCE, a, b, now, now + transfer_ns(link(a, b), size), size,
                                            processed[0]))
            for v, _ in out[u]:
                arrival = now + arrival_delay(u, v)
                if once[v]:
                    input_known(v, 0, arrival, now)
                else:
                    for k in range(m_count):
                        input_known(v, k, arrival, now)
            return
        for b, size in sorted(per_copy_to[u].items()):
            s.transfers.append(Transfer(u, m, PER_COPY, a, b, now, now + transfer_ns(link(a, b), size), size,
                                        processed[0]))
        for v, _ in out[u]:
            if not (has_once and once[v]):
                input_known(v, m, now + arrival_delay(u, v), now)
        microbatch_left[m] -= 1
        if microbatch_left[m] == 0:
            done[m] = now
            if window < m_count:
                for v in gated[m]:
                    enqueue(v, m + window, m + window)
                gated[m] = []
        if gradient[u]:
            copies_left[u] -= 1
            if copies_left[u] == 0:
                if replicas > 1:
                    heapq.heappush(ring_ready[a], (now, name_rank[names[u]], u))
                else:
                    release_gradient(u, now)

    for m in range(m_count):
        for u in range(n):
            if (m == 0 or not once[u]) and pending[(u, m)] == 0:
                make_ready(u, m)

    now, finished = 0, 0
    while True:
        for d in range(group):
            if not busy[d] and ready[d]:
                _, _, _, u, m = heapq.heappop(ready[d])
                key = (u, -1 if once[u] else m)
                s.start_ns[key] = now
                s.finish_ns[key] = now + duration[u]
                s.order[d].append(key)
                busy[d] = True
                push_event(now + duration[u], "finish", (u, m))
        if replicas > 1 and (not events or events[0][0] != now):
            for d in range(group):
                if not ring_busy[d] and ring_ready[d]:
                    _, _, u = heapq.heappop(ring_ready[d])
                    ring_busy[d] = True
                    end = now + all_reduce_ns(ring_link[d], replicas, reduce_bytes[u])
                    s.all_reduces[d].append(u)
                    s.all_reduce_ns[u] = (now, end)
                    push_event(end, "all_reduce", u)
        if not events:
            break
        now = events[0][0]
        while events and events[0][0] == now:
            _, _, kind, payload = heapq.heappop(events)
            processed[0] += 1
            if kind == "finish":
                finished += 1
                finish(*payload, now)
            elif kind == "ready":
                make_ready(*payload)
            else:
                ring_busy[device[payload]] = False
                release_gradient(payload, now)
    expected = per_microbatch_ops * m_count + sum(once)
    if finished != expected:
        raise ValueError(f"{expected - finished} instances never ran (a once op inside the microbatch flow?)")
    s.microbatch_done_ns = done
    return s
