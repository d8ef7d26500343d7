"""A placed plan written as module-level split points, the form pipeline frameworks take.

    split = module_split.module_split(traced, request, placement)   # traced: torch_run.trace(...)
    split["stages"]        # [{"device": 0, "modules": ["embedding", "blocks.0"]}, {"device": 1, ...}]
    split["split_points"]  # ["blocks.1"]: where each stage after the first begins
    split["microbatches"], split["max_in_flight"], split["data_parallel"]

A module belongs to the device of its parameters (their ops `param:<module>.<name>`, with which the
exporter colocates their updates); modules are taken in the order the step's forward first reads
their parameters (a module whose parent calls its weights directly, such as attention's out_proj, is
where they are read). The plan is module-level when every module's parameters share a device and each
device's modules form one run of that order (stages contiguous in module order). Names are the
highest modules whose parameters all lie in one stage (`blocks.0` rather than its layers). Only where
parameters live decides this: a placement may still put parameter-free ops (activations, the loss)
elsewhere, which a framework running whole modules per stage would not. Raises NotModuleLevel, with
the reason, otherwise.
"""
from placement import torch_dist, torch_run


class NotModuleLevel(ValueError):
    """The placement is not a split of the model's modules into contiguous stages."""


def parameter_order(traced):
    """Modules owning parameters ({module: [parameter op names]}), in the order the traced step first
    reads one of their parameters."""
    op_of = torch_run.node_ops(traced)
    owners = {}
    for name in traced.names("param"):
        module = name.rpartition(".")[0]
        owners.setdefault(module, [])
    order = {}
    for x in traced.graph_module.graph.nodes:
        if x.op != "call_function" or op_of[x].startswith("param:"):
            continue
        for q in x.all_input_nodes:
            op = op_of.get(q, "")
            if op.startswith("param:"):
                order.setdefault(op[len("param:"):].rpartition(".")[0], len(order))
    for name in traced.names("param"):
        owners[name.rpartition(".")[0]].append(f"param:{name}")
    ranked = sorted(owners, key=lambda module: order.get(module, len(order)))
    return {module: owners[module] for module in ranked}


def module_split(traced, request, placement):
    """The split of the traced model that `placement` (a Placement dict, or (devices, plan)) makes, as a
    dict (see the module docstring). NotModuleLevel when the stages are not contiguous in module order."""
    devices, plan = torch_dist._devices_and_plan(request, placement)
    index = {op["name"]: i for i, op in enumerate(request["graph"]["ops"])}
    device_of = {}
    for module_name, params in parameter_order(traced).items():
        seen = set()
        for op_name in params:
            if op_name not in index:
                raise NotModuleLevel(f"the request has no op {op_name}")
            seen.add(devices[index[op_name]])
        if len(seen) > 1:
            raise NotModuleLevel(f"{module_name or '(root)'} has parameters on devices {sorted(seen)}")
        device_of[module_name] = seen.pop()
    runs = []
    for name, device in device_of.items():
        if runs and runs[-1][0] == device:
            runs[-1][1].append(name)
        else:
            runs.append((device, [name]))
    repeated = [device for device in {d for d, _ in runs} if sum(1 for d, _ in runs if d == device) > 1]
    if repeated:
        first = next(d for d, _ in runs if d in repeated)
        raise NotModuleLevel(f"device {first}'s modules are not contiguous in module order "
                             f"({len(runs)} runs over {len({d for d, _ in runs})} devices)")
    stage_of = {name: s for s, (_, names) in enumerate(runs) for name in names}
    stages = [{"device": device, "modules": _coarsen(names, stage_of, s)} for s, (device, names) in enumerate(runs)]
    m = int(plan.get("microbatches") or 1)
    return {"stages": stages, "split_points": [stage["modules"][0] for stage in stages[1:]],
            "microbatches": m, "max_in_flight": int(plan.get("max_in_flight") or m),
            "data_parallel": int(plan.get("data_parallel") or 1)}


def _coarsen(names, stage_of, stage):
    """The highest ancestors of `names` whose parameter-owning descendants all lie in `stage`."""
    out = []
    for name in names:
        parts = name.split(".") if name else []
        chosen = name
        for cut in range(1, len(parts)):
            prefix = ".".join(parts[:cut])
            members = [n for n in stage_of if n == prefix or n.startswith(prefix + ".")]
            if members and all(stage_of[n] == stage for n in members):
                chosen = prefix
                break
        if chosen not in out:
            out.append(chosen)
    return out
