"""Exports one PyTorch training step (forward + backward + optimizer update) as a PlaceRequest.

    python3 -m placement.torch_export --model=torchvision:resnet18 --batch=8 --image_size=224 \
        --devices=4 --out=resnet18.json
    python3 -m placement.torch_export --model=transformer --layers=4 --d_model=256 --heads=4 --seq=128 \
        --out=transformer.pb
    python3 -m placement.torch_export --model=torchvision:fcn_resnet50 --classes=21 --image_size=128 \
        --out=fcn.json                     # also torchvision's video and optical-flow models (torchvision_model)
    python3 -m placement.torch_export --model=mypkg.models:build --out=mine.json   # build() -> (model, inputs)
    python3 -m placement.torch_export --model=transformer --batch=32 --microbatches=8 --data_parallel=0 \
        --devices=8 --out=plan.json                                      # a training plan, api.md section 2.1

How (torch 1.13): the whole step is written as one function of (parameters, buffers, optimizer state,
inputs) — functional_call for the forward, torch.autograd.grad for the backward, the optimizer's update
rule written out — and traced with make_fx into one graph of aten ops, the "joint graph" AOT autograd
builds. The traced graph then becomes the request:

* every aten op is an op (`type` = the aten op name); views, `getitem` of multi-output ops and `detach`
  are not ops: they alias their producer, so a tensor's producer stays alive until the last reader of any
  view of it has run;
* `output_bytes` = bytes of the tensors the op creates (ops writing in place create none); edges carry
  the bytes the consumer reads (the size of the tensor or view it uses);
* each parameter is an op `param:<name>` whose `persistent_bytes` are the parameter plus its optimizer
  state (SGD momentum: 1 copy; Adam: 2) and which feeds every reader of the parameter and of its state;
  the ops that compute its update (reachable from its gradient, not needed by the loss or any gradient)
  share the colocation group `param:<name>` with it, so weights and optimizer state never travel;
  the buffers of a module (batch-norm statistics) are one op `buffers:<module>` in a group of that name
  with the ops that write them in place (native_batch_norm too, whose 1.13 schema does not say so);
* an in-place write gets a control edge (0 bytes) to each later reader of the storage it writes that
  has no data edge from it, and when the old value is read again later through a view made before the
  write, the writer shares a group (`inplace:<op>`) with the op owning what it writes: a copy written
  on another device would not be seen by that view (placement.torch_run relies on both);
* the step's inputs are ops `input:<i>` holding the batch;
* `compute_ns`: a roofline estimate, launch overhead + max(FLOPs / --peak_tflops, bytes moved /
  --bandwidth_gbps) (FLOPs counted for matrix products and convolutions and their backward, one per
  output element otherwise), or with --profile the median measured time of the op on this machine's CPU.

Training plans (api.md section 2.1): with --microbatches=M the request is one microbatch's step, traced
on batch / M samples (a batch that does not divide by M is refused), with options.microbatches = M and
--max_in_flight / --data_parallel passed through. The loss is divided by M (a loss averaging over the
batch; `loss_reduction="sum"` from Python keeps it), so that the sum of the microbatches' gradients,
which a plan accumulates, is the batch's gradient. Marked `once_per_step`: every op after the last
backward op (the optimizer update: what computes the new parameters and optimizer state, and whatever
else the data flows into that neither the loss nor a gradient needs) and the parameter and buffer ops,
state read before the first microbatch (a parameter sent to a reader's device once a step, and never
taken for a gradient to all-reduce). Batch-norm statistics are then updated by each microbatch's
forward, as PyTorch's gradient accumulation does. Without a plan flag the request is byte for byte the
one of a plain step.

The loss of the built-in models is the cross-entropy of the main output; a model whose training-mode
output also carries auxiliary classifiers' logits (torchvision's GoogLeNet and Inception-v3 return them
in a namedtuple) adds AUX_LOSS_WEIGHT (0.4) x each of theirs, so that those heads train as they do in
practice (model_outputs says what counts as the main and the auxiliary outputs).

The cluster is --devices identical devices of --device_memory_gib on one node linked by
--link_bandwidth_gbps / --link_latency_us. Output: protobuf JSON (`.json`, `.json.gz`) or binary
(`.pb`; needs the generated stubs on PYTHONPATH), read by `placement_offline` and `placementctl`.
"""
import argparse
import gzip
import importlib
import json
import operator
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils import stateless

# Defaults as in the C++ importers' RooflineModel (service/importers/import_options.h): an
# NVIDIA V100-class device.
DEFAULT_PEAK_TFLOPS = 15.7
DEFAULT_BANDWIDTH_GBPS = 900.0
DEFAULT_LAUNCH_OVERHEAD_NS = 5000

OPTIMIZER_STATE_COPIES = {"sgd": 1, "adam": 2}


# ---------------------------------------------------------------------------------------------------
# Tracing


# The weight of an auxiliary classifier's loss beside the main one, as PyTorch's fine-tuning tutorial
# trains Inception-v3 (loss1 + 0.4 * loss2); GoogLeNet's paper weighed its two at 0.3.
AUX_LOSS_WEIGHT = 0.4


def model_outputs(output):
    """(main, [auxiliary ...]) of a model's training-mode output. A tensor is the main output itself.
    From a tuple, list or namedtuple (torchvision's GoogLeNet and Inception-v3 return their auxiliary
    classifiers' logits beside the main ones while training) or a mapping or object with `logits` (as
    Hugging Face outputs have it), the main output is `logits` if there is one, else the first tensor;
    the other tensors of the main output's shape are auxiliary outputs (None entries, an auxiliary head
    switched off, are skipped). TypeError when there is no tensor."""
    if isinstance(output, torch.Tensor):
        return output, []
    logits = output.get("logits") if isinstance(output, dict) else getattr(output, "logits", None)
    if isinstance(output, dict):
        values = list(output.values())
    elif isinstance(output, (tuple, list)):
        values = list(output)
    else:
        values = [logits]
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    main = logits if isinstance(logits, torch.Tensor) else (tensors[0] if tensors else None)
    if main is None:
        raise TypeError(f"the model's output ({type(output).__name__}) holds no tensor to take a loss of")
    auxiliary = [t for t in tensors if t is not main and t.shape == main.shape]
    return main, auxiliary


def _loss_mean(output, targets):
    return model_outputs(output)[0].float().mean()


def split_microbatch(inputs, targets, microbatches):
    """The first of `microbatches` equal microbatches of a batch: (inputs, targets) cut to batch / M rows
    along dimension 0, which every tensor must share. ValueError when the batch does not divide by M."""
    if microbatches < 1:
        raise ValueError(f"microbatches must be >= 1, got {microbatches}")
    tensors = [t for t in (*inputs, *targets) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise ValueError("microbatches need the batch as tensors")
    if any(t.dim() == 0 for t in tensors):
        raise ValueError("microbatches split dimension 0 of the inputs and targets; one is a scalar")
    batch = tensors[0].shape[0]
    if any(t.shape[0] != batch for t in tensors):
        raise ValueError(f"microbatches split dimension 0 of the inputs and targets, which must agree; got "
                         f"{[t.shape[0] for t in tensors]}")
    if batch % microbatches:
        raise ValueError(f"batch {batch} is not divisible by microbatches {microbatches}: each microbatch "
                         f"must hold the same number of samples")
    size = batch // microbatches

    def cut(values):
        return tuple(v[:size] if isinstance(v, torch.Tensor) else v for v in values)

    return cut(inputs), cut(targets)


def trace_training_step(model, example_inputs, loss_fn=None, optimizer="sgd", targets=(), lr=0.01,
                        microbatches=1, loss_reduction="mean"):
    """Traces one training step of `model` on `example_inputs` (a tuple of forward arguments) into an
    fx graph of aten ops.

    `loss_fn(output, targets) -> scalar tensor`, default the mean of the output; `targets` is a tuple of
    tensors the loss reads (labels). Returns (graph_module, placeholders, flat_args): placeholders
    describes the traced function's arguments in order: [("param", name, tensor) ..., ("buffer", name,
    tensor) ..., ("state", param name, tensor) ..., ("input", index, tensor) ...] (inputs, then targets),
    flat_args are those tensors, and the graph returns (new params, new states, loss, grads).

    With `microbatches` M > 1 the caller passes one microbatch (split_microbatch cuts it) and, for a
    loss that averages over the batch (`loss_reduction="mean"`), the loss is divided by M: a step sums
    its microbatches' gradients (api.md section 2.1), and that sum is then the full batch's gradient, as
    the sum of the M scaled losses is its loss. A loss that sums over the batch passes "sum".
    """
    if optimizer not in OPTIMIZER_STATE_COPIES:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZER_STATE_COPIES)}")
    if loss_reduction not in ("mean", "sum"):
        raise ValueError(f"loss_reduction must be mean or sum, got {loss_reduction!r}")
    loss_fn = loss_fn or _loss_mean
    if microbatches > 1 and loss_reduction == "mean":
        unscaled = loss_fn

        def loss_fn(output, targets):
            return unscaled(output, targets) / microbatches
    model.train()
    param_names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = [p.detach().clone().requires_grad_(True) for n, p in model.named_parameters() if p.requires_grad]
    buffer_names = [n for n, _ in model.named_buffers()]
    buffers = [b.detach().clone() for _, b in model.named_buffers()]
    copies = OPTIMIZER_STATE_COPIES[optimizer]
    states = [torch.zeros_like(p, requires_grad=False) for p in params for _ in range(copies)]
    inputs = tuple(example_inputs)
    n_inputs = len(inputs)
    inputs = inputs + tuple(targets)
    n_params, n_buffers, n_states = len(params), len(buffers), len(states)

    def step(*flat):
        ps = list(flat[:n_params])
        bs = list(flat[n_params:n_params + n_buffers])
        ss = list(flat[n_params + n_buffers:n_params + n_buffers + n_states])
        xs = flat[n_params + n_buffers + n_states:]
        tensors = dict(zip(param_names, ps))
        tensors.update(zip(buffer_names, bs))
        output = stateless.functional_call(model, tensors, tuple(xs[:n_inputs]))
        loss = loss_fn(output, tuple(xs[n_inputs:]))
        grads = torch.autograd.grad(loss, ps, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(ps, grads)]
        new_params, new_states = [], []
        with torch.no_grad():
            for i, (p, g) in enumerate(zip(ps, grads)):
                if optimizer == "sgd":
                    momentum = ss[i] * 0.9 + g
                    new_params.append(p - lr * momentum)
                    new_states.append(momentum)
                else:  # adam (bias correction folded into lr: one step)
                    m = ss[2 * i] * 0.9 + g * 0.1
                    v = ss[2 * i + 1] * 0.999 + g * g * 0.001
                    new_params.append(p - lr * m / (v.sqrt() + 1e-8))
                    new_states.extend([m, v])
        return new_params, new_states, loss.detach(), [g.detach() for g in grads]

    flat = [*params, *buffers, *states, *inputs]
    graph_module = make_fx(step)(*flat)
    placeholders = ([("param", n, p) for n, p in zip(param_names, params)] +
                    [("buffer", n, b) for n, b in zip(buffer_names, buffers)] +
                    [("state", param_names[i // copies], s) for i, s in enumerate(states)] +
                    [("input", i, x) for i, x in enumerate(inputs)])
    return graph_module, placeholders, flat


# ---------------------------------------------------------------------------------------------------
# Costs


def _tensor_bytes(value):
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


def _numel(value):
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (tuple, list)):
        return sum(_numel(v) for v in value)
    return 0


def _shape(value):
    return tuple(value.shape) if isinstance(value, torch.Tensor) else ()


def _prod(values):
    result = 1
    for v in values:
        result *= int(v)
    return result


def count_flops(op_name, args, output):
    """FLOPs of one aten op from its argument and output values: exact for matrix products and
    convolutions (2 per multiply-add), one per output element otherwise."""
    if op_name in ("mm", "addmm"):
        a, b = (args[0], args[1]) if op_name == "mm" else (args[1], args[2])
        return 2 * _prod(_shape(a)) * _shape(b)[-1] + (_numel(output) if op_name == "addmm" else 0)
    if op_name in ("bmm", "baddbmm"):
        a, b = (args[0], args[1]) if op_name == "bmm" else (args[1], args[2])
        return 2 * _prod(_shape(a)) * _shape(b)[-1]
    if op_name == "convolution":
        weight = _shape(args[1])
        if len(weight) >= 3:  # [out_channels, in_channels / groups, *kernel]
            return 2 * _numel(output) * _prod(weight[1:])
    if op_name == "convolution_backward":
        # grad_output, input, weight, ...: input and weight gradients each cost about one forward.
        weight = _shape(args[2])
        mask = args[-1] if isinstance(args[-1], (list, tuple)) else (True, True, True)
        forward = 2 * _numel(args[0]) * _prod(weight[1:]) if len(weight) >= 3 else _numel(args[0])
        return forward * (int(bool(mask[0])) + int(bool(mask[1]))) + _numel(args[0])
    return _numel(output)


def roofline_ns(flops, bytes_moved, peak_flops, bandwidth, launch_overhead_ns):
    return int(round(launch_overhead_ns + max(flops / peak_flops, bytes_moved / bandwidth) * 1e9))


# ---------------------------------------------------------------------------------------------------
# Graph -> request


def _op_name(node):
    target = node.target
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return packet.__name__
    return getattr(target, "__name__", str(target))


def _aliases_an_input(node):
    """True when the op returns a view of an input (no new memory, no kernel)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return node.target is operator.getitem
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


# Ops that write arguments in place without saying so in their schema (torch 1.13): in training mode
# native_batch_norm updates running_mean and running_var (positions 3 and 4; position 5 is `training`).
_UNANNOTATED_WRITES = {"native_batch_norm": ((3, 4), 5)}


def _written_arguments(node):
    """The nodes an op writes in place (its `Tensor(a!)` arguments, and the known unannotated ones)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return []
    written = []
    positions, flag = _UNANNOTATED_WRITES.get(_op_name(node), ((), None))
    if flag is not None and len(node.args) > flag and node.args[flag] is True:
        written.extend(node.args[i] for i in positions if isinstance(node.args[i], torch.fx.Node))
    for position, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = node.args[position] if position < len(node.args) else node.kwargs.get(argument.name)
        if isinstance(value, torch.fx.Node):
            written.append(value)
    return written


def _fresh_output_bytes(node, value):
    """Bytes of the tensors an op creates: its returns that do not alias an argument."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return _tensor_bytes(value)
    returns = schema.returns
    if isinstance(value, (tuple, list)) and len(value) == len(returns):
        return sum(_tensor_bytes(v) for v, r in zip(value, returns) if r.alias_info is None)
    if len(returns) == 1 and returns[0].alias_info is not None:
        return 0
    return _tensor_bytes(value)


def _input_nodes(node):
    found = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: found.append(n))
    return found


def _alias_root(node, base, root):
    """The storage a view-like node aliases. The outputs of a multi-output op that creates tensors
    (native_batch_norm's output, mean, invstd) are separate storages; those of a view op (split) share
    its input's."""
    base_root = root.get(base, base)
    if node.target is operator.getitem and base_root is base:
        return (base, node.args[1])
    return base_root


def _inplace_hazards(nodes):
    """What in-place writes add to the data edges: (writer, reader) pairs where the reader comes later
    and reads the written storage through any alias, and the writers whose storage is read again later
    through an alias made before the write, each with the argument it writes (such a write must happen
    where that argument lives: a copy written elsewhere would not be seen)."""
    root, parent, last_writer = {}, {}, {}
    reads_after, stay = [], set()
    for n in nodes:
        if n.op == "placeholder":
            root[n] = n
        if n.op != "call_function":
            continue
        inputs = _input_nodes(n)
        if _aliases_an_input(n) and inputs:
            root[n], parent[n] = _alias_root(n, inputs[0], root), inputs[0]
            continue
        written = _written_arguments(n)
        for p in inputs:
            writer = last_writer.get(root.get(p, p))
            if writer is not None and writer is not n:
                reads_after.append((writer, n))
                alias = p
                while alias is not None and alias is not writer:
                    alias = parent.get(alias)
                if alias is None:
                    stay.add(writer)
        schema = getattr(n.target, "_schema", None)
        if written and schema is not None and any(r.alias_info is not None for r in schema.returns):
            root[n], parent[n] = root.get(written[0], written[0]), written[0]
        else:
            root[n] = n
        for w in written:
            last_writer[root.get(w, w)] = n
    return reads_after, {w: _written_arguments(w)[0] for w in stay}


class _Recorder(torch.fx.Interpreter):
    """Runs the graph op by op, keeping every node's value and each op's wall time."""

    def __init__(self, module):
        super().__init__(module)
        self.values = {}
        self.times = defaultdict(list)

    def run_node(self, n):
        start = time.perf_counter_ns()
        result = super().run_node(n)
        if n.op == "call_function":
            self.times[n.name].append(time.perf_counter_ns() - start)
        self.values[n.name] = result
        return result


def build_request(graph_module, placeholders, flat_args, *, devices=2, device_memory_gib=16.0,
                  device_kind="gpu", link_bandwidth_gbps=100.0, link_latency_us=2.0, optimizer="sgd",
                  peak_tflops=DEFAULT_PEAK_TFLOPS, bandwidth_gbps=DEFAULT_BANDWIDTH_GBPS,
                  launch_overhead_ns=DEFAULT_LAUNCH_OVERHEAD_NS, profile_runs=0, algorithm="",
                  microbatches=None, max_in_flight=None, data_parallel=None):
    """The PlaceRequest (protobuf JSON mapping, as a dict) of a traced step; see the module docstring.

    A training plan (api.md section 2.1) is asked for by any of `microbatches` (M, the traced step being
    one microbatch), `max_in_flight` (W, 0 = the solver chooses) or `data_parallel` (D, 0 = the solver
    chooses): the options carry them (M defaults to 1) and the ops that run once per step are marked
    (see once_per_step_ops). With none of them the request is the plain one of api.md section 2.
    """
    # Values of every node (for shapes) and, with profile_runs, op times: the graph holds the backward
    # ops explicitly, so it runs without autograd.
    recorder = _Recorder(graph_module)
    with torch.no_grad():
        for _ in range(max(profile_runs, 1)):
            recorder.run(*flat_args)
    values = recorder.values

    nodes = list(graph_module.graph.nodes)
    placeholder_nodes = [n for n in nodes if n.op == "placeholder"]
    output_node = next(n for n in nodes if n.op == "output")

    ops = []  # dicts in request order
    producer = {}  # node name -> index of the op owning the node's memory (through views)
    group_of = {}  # op index -> colocation group
    param_op = {}  # parameter name -> op index

    def add_op(name, type_name, compute_ns=0, output_bytes=0, persistent_bytes=0):
        op = {"name": name, "type": type_name}
        if compute_ns:
            op["compute_ns"] = str(compute_ns)
        if output_bytes:
            op["output_bytes"] = str(output_bytes)
        if persistent_bytes:
            op["persistent_bytes"] = str(persistent_bytes)
        ops.append(op)
        return len(ops) - 1

    # Placeholders: parameters (+ their optimizer state), buffers (one op per module), inputs.
    state_bytes = defaultdict(int)
    buffer_bytes = defaultdict(int)
    for kind, key, tensor in placeholders:
        if kind == "state":
            state_bytes[key] += _tensor_bytes(tensor)
        elif kind == "buffer":
            buffer_bytes[key.rpartition(".")[0]] += _tensor_bytes(tensor)
    buffer_op = {}
    for node, (kind, key, tensor) in zip(placeholder_nodes, placeholders):
        if kind == "param":
            index = add_op(f"param:{key}", "parameter",
                           persistent_bytes=_tensor_bytes(tensor) + state_bytes[key])
            param_op[key] = index
            group_of[index] = f"param:{key}"
        elif kind == "buffer":
            owner = key.rpartition(".")[0]
            if owner not in buffer_op:
                buffer_op[owner] = add_op(f"buffers:{owner or '(root)'}", "buffer",
                                          persistent_bytes=buffer_bytes[owner])
                group_of[buffer_op[owner]] = f"buffers:{owner or '(root)'}"
            index = buffer_op[owner]
        elif kind == "state":
            index = param_op[key]  # the state lives with its parameter
        else:
            index = add_op(f"input:{key}", "input", output_bytes=_tensor_bytes(tensor))
        producer[node.name] = index

    # Which ops compute the update of which parameter: ancestors of its outputs (new value, new state)
    # that neither the loss nor any gradient needs.
    new_params, new_states, loss_out, grads_out = output_node.args[0]
    param_names = [key for kind, key, _ in placeholders if kind == "param"]
    copies = OPTIMIZER_STATE_COPIES[optimizer]

    def ancestors(roots):
        seen = set()
        stack = [r for r in roots if isinstance(r, torch.fx.Node)]
        while stack:
            n = stack.pop()
            if n.name in seen:
                continue
            seen.add(n.name)
            stack.extend(_input_nodes(n))
        return seen

    training = ancestors([loss_out, *grads_out])
    update_owner = {}
    for i, name in enumerate(param_names):
        for n in ancestors([new_params[i], *new_states[copies * i:copies * (i + 1)]]) - training:
            update_owner[n] = name if update_owner.get(n, name) == name else None

    # Ops and edges.
    edges = {}
    peak_flops = peak_tflops * 1e12
    bandwidth = bandwidth_gbps * 1e9
    for node in nodes:
        if node.op != "call_function":
            continue
        inputs = [n for n in _input_nodes(node) if n.name in producer]
        if _aliases_an_input(node) and inputs:
            producer[node.name] = producer[inputs[0].name]  # a view: its memory is its base's
            continue
        value = values.get(node.name)
        op_type = _op_name(node)
        read_bytes = {n.name: _tensor_bytes(values.get(n.name)) for n in inputs}
        out_bytes = _fresh_output_bytes(node, value)
        if profile_runs > 0 and recorder.times.get(node.name):
            compute = max(1, int(statistics.median(recorder.times[node.name])))
        else:
            arg_values = [values.get(a.name) if isinstance(a, torch.fx.Node) else a for a in node.args]
            flops = count_flops(op_type, arg_values, value)
            compute = roofline_ns(flops, sum(read_bytes.values()) + out_bytes, peak_flops, bandwidth,
                                  launch_overhead_ns)
        index = add_op(node.name, op_type, compute_ns=compute, output_bytes=out_bytes)
        producer[node.name] = index
        owner = update_owner.get(node.name)
        if owner is not None:
            group_of[index] = f"param:{owner}"
        else:
            # An op writing a buffer in place (batch-norm statistics) runs where the buffer lives.
            # (The buffer op itself: not any member of its group, such as the batch-norm whose
            # output relu_ overwrites.)
            for written in _written_arguments(node):
                owner = producer.get(written.name)
                if owner is not None and ops[owner]["type"] == "buffer":
                    group_of[index] = group_of[owner]
                    break
        for n in inputs:
            src = producer[n.name]
            if src != index:
                edges[(src, index)] = max(edges.get((src, index), 0), read_bytes[n.name])

    # In-place writes: later readers of the written storage wait for the write (a control edge where
    # no data edge says so), and a write whose old value is read again later runs with the storage.
    reads_after, stay = _inplace_hazards(nodes)
    for writer, reader in reads_after:
        src, dst = producer[writer.name], producer[reader.name]
        if src != dst:
            edges.setdefault((src, dst), 0)
    for writer, written in stay.items():
        index, owner = producer[writer.name], producer[written.name]
        groups = {group_of[i] for i in (index, owner) if i in group_of}
        if len(groups) <= 1:  # (two different groups cannot merge: left to the runner to refuse)
            group = groups.pop() if groups else f"inplace:{ops[owner]['name']}"
            group_of[owner] = group_of[index] = group

    for index, group in group_of.items():
        ops[index]["colocation_group"] = group
    plan = microbatches is not None or max_in_flight is not None or data_parallel is not None
    if plan:
        # After the last backward op: what computes the new parameters and optimizer state, and
        # whatever else the microbatches' data flows into that neither the loss nor a gradient needs.
        # (Not the ops that need neither and see no data, such as batch-norm's num_batches_tracked
        # += 1: every microbatch's forward runs them, as PyTorch's gradient accumulation does.)
        after = ancestors([*new_params, *new_states]) - training
        from_data = {n.name for n, (kind, _, _) in zip(placeholder_nodes, placeholders) if kind == "input"}
        for node in nodes:
            if node.op == "call_function" and any(n.name in from_data for n in _input_nodes(node)):
                from_data.add(node.name)
        after |= from_data - training
        sources = [i for i, op in enumerate(ops) if op["type"] in ("parameter", "buffer")]
        # (A view left unread, such as a getitem of an unused output, belongs to its op's training.)
        updates = sorted({producer[name] for name in after
                          if name in producer and ops[producer[name]]["name"] == name} - set(sources))
        for index in once_per_step_ops(ops, edges, sources, updates):
            ops[index]["once_per_step"] = True
    memory = int(device_memory_gib * (1 << 30))
    request = {
        "graph": {
            "ops": ops,
            "edges": [{"src": s, "dst": d, **({"bytes": str(b)} if b else {})}
                      for (s, d), b in sorted(edges.items())],
        },
        "cluster": {
            "devices": [{"name": f"{device_kind}{i}", "kind": device_kind, "node": "host0",
                         "memory_bytes": str(memory)} for i in range(devices)],
            "intra_node": {"bandwidth_bytes_per_second": str(int(link_bandwidth_gbps * 1e9)),
                           "latency_ns": str(int(link_latency_us * 1000))},
        },
    }
    if algorithm:
        request["options"] = {"algorithm": algorithm}
    if plan:
        options = request.setdefault("options", {})
        options["microbatches"] = int(microbatches if microbatches is not None else 1)
        if max_in_flight is not None:
            options["max_in_flight"] = int(max_in_flight)
        if data_parallel is not None:
            options["data_parallel"] = int(data_parallel)
    return request


def once_per_step_ops(ops, edges, sources, updates):
    """The ops of a plan's step that run once, not once per microbatch (api.md section 2.1): the
    parameters and buffers (`sources`: state read before the first microbatch; as once ops their
    values travel to a reader's device once a step, and a parameter is never taken for a gradient to
    all-reduce) and every op after the last backward op (`updates`: ops that neither the loss nor any
    gradient needs, i.e. the optimizer update). Checks api.md's rule, that a once op with a
    per-microbatch ancestor has no per-microbatch descendant; ValueError naming the op otherwise.

    `edges` is {(src, dst): bytes}. Returns the sorted op indices."""
    once = set(sources) | set(updates)
    successors = defaultdict(list)
    for src, dst in edges:
        successors[src].append(dst)
    # Ops are written in a topological order (edges go from lower to higher indices). A per-microbatch
    # descendant of a once op that follows a microbatch has a once parent that does: checking the
    # direct successors finds every violation.
    follows_microbatch = [False] * len(ops)
    for i in range(len(ops)):
        for j in successors[i]:
            follows_microbatch[j] = follows_microbatch[j] or follows_microbatch[i] or i not in once
    for i in sorted(once):
        late = next((j for j in successors[i] if j not in once), None) if follows_microbatch[i] else None
        if late is not None:
            raise ValueError(f"{ops[i]['name']} runs once per step after a microbatch, but "
                             f"{ops[late]['name']} reads it in every microbatch")
    return sorted(once)


def export_training_step(model, example_inputs, loss_fn=None, optimizer="sgd", targets=(), microbatches=None,
                         loss_reduction="mean", **request_options):
    """Traces `model`'s training step on `example_inputs` (and the loss's `targets`) and returns the
    PlaceRequest as a dict (the protobuf JSON mapping). `request_options` are build_request's keyword
    arguments (cluster, roofline, profiling, max_in_flight, data_parallel).

    `microbatches` M: the request is one microbatch's step (the first batch / M samples of the inputs
    and targets; ValueError when the batch does not divide by M) with options.microbatches = M and the
    once-per-step ops marked (build_request)."""
    if microbatches is not None:
        example_inputs, targets = split_microbatch(tuple(example_inputs), tuple(targets), microbatches)
    graph_module, placeholders, flat = trace_training_step(model, example_inputs, loss_fn, optimizer, targets,
                                                           microbatches=microbatches or 1,
                                                           loss_reduction=loss_reduction)
    return build_request(graph_module, placeholders, flat, optimizer=optimizer, microbatches=microbatches,
                         **request_options)


def write_request(request, path):
    """Writes the request: protobuf JSON for .json / .json.gz, binary protobuf for .pb."""
    path = Path(path)
    if path.name.endswith(".pb"):
        from google.protobuf import json_format
        from placement.v1 import placement_pb2

        message = json_format.ParseDict(request, placement_pb2.PlaceRequest())
        path.write_bytes(message.SerializeToString())
        return
    text = json.dumps(request, indent=1)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text)


# ---------------------------------------------------------------------------------------------------
# Built-in models for the command line


class TransformerStack(torch.nn.Module):
    """Token embedding, `layers` encoder blocks, a linear head: a small language-model-like stack."""

    def __init__(self, layers, d_model, heads, vocab=1000):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, d_model)
        block = dict(d_model=d_model, nhead=heads, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True)
        self.blocks = torch.nn.ModuleList(torch.nn.TransformerEncoderLayer(**block) for _ in range(layers))
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, tokens):
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class SmallCNN(torch.nn.Module):
    """Convolutions and a linear head without batch norm: its step over a batch equals the sum of its
    microbatches' steps, which a network normalising over the batch does not."""

    def __init__(self, classes=10, width=16):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(width, 2 * width, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten())
        self.head = torch.nn.Linear(2 * width, classes)

    def forward(self, images):
        return self.head(self.features(images))


def _cross_entropy(output, targets):
    """Cross-entropy of the main output against targets[0], plus AUX_LOSS_WEIGHT x that of each
    auxiliary output (model_outputs)."""
    def loss_of(logits):
        target = targets[0]
        if target.shape != logits.shape[:-1] and target.shape == logits.shape[:1] + logits.shape[2:]:
            # Classes along dimension 1, one label per position: (N, C, H, W) segmentation logits.
            return torch.nn.functional.cross_entropy(logits, target)
        # Classes along the last dimension: (N, C) classifiers, (N, T, V) token logits.
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    main, auxiliary = model_outputs(output)
    loss = loss_of(main)
    for logits in auxiliary:
        loss = loss + AUX_LOSS_WEIGHT * loss_of(logits)
    return loss


# torchvision.models' families searched for a bare name, in this order ("" = the classifiers).
TORCHVISION_FAMILIES = ("", "segmentation", "video", "optical_flow")
TORCHVISION_DEFAULT_CLASSES = {"segmentation": 21, "video": 400}  # the others: 1000


def _raft_loss(output, targets, gamma=0.8):
    """RAFT's sequence loss: the mean L1 error of each refinement's flow against targets[0], the later
    refinements weighed more (gamma^(n - 1 - i), as RAFT trains)."""
    flows = list(output)
    return sum(gamma ** (len(flows) - 1 - i) * (flow - targets[0]).abs().mean() for i, flow in enumerate(flows))


def torchvision_model(name, args):
    """(model, inputs, loss function, targets) for torchvision:NAME or torchvision:FAMILY.NAME, untrained
    (no weights are downloaded): classifiers (images, labels), segmentation (images, a label per pixel;
    per-pixel cross-entropy, the auxiliary head's at AUX_LOSS_WEIGHT), video classifiers (clips of
    --frames frames), optical flow (two images, RAFT's sequence loss against a flow field)."""
    import torchvision.models as models

    family, _, short = name.rpartition(".")
    builder = None
    for candidate in ((family,) if family else TORCHVISION_FAMILIES):
        if candidate not in TORCHVISION_FAMILIES:
            break
        found = getattr(getattr(models, candidate) if candidate else models, short, None)
        # A builder function; not a class or a submodule of the same name (models.video.resnet).
        if callable(found) and not isinstance(found, type) and not short.startswith("_"):
            family, builder = candidate, found
            break
    if builder is None and family in ("", "detection") and callable(getattr(models.detection, short, None)):
        raise SystemExit(f"--model: {name!r} is a detection model; its training step depends on the data (box "
                         "matching and sampling, non-maximum suppression), so it cannot be traced as one graph")
    if builder is None:
        raise SystemExit(f"--model: torchvision has no model {name!r} in "
                         f"{', '.join('models' + ('.' + f if f else '') for f in TORCHVISION_FAMILIES)}")
    batch, size = args.batch, args.image_size
    # Without --classes, each family's own default: ImageNet's 1000, Pascal VOC's 21, Kinetics' 400.
    classes = getattr(args, "classes", None)
    classes = classes if classes is not None else TORCHVISION_DEFAULT_CLASSES.get(family, 1000)
    if family == "segmentation":
        model = builder(weights=None, weights_backbone=None, num_classes=classes)
        labels = torch.randint(0, classes, (batch, size, size))
        return model, (torch.randn(batch, 3, size, size),), _cross_entropy, (labels,)
    if family == "video":
        model = builder(weights=None, num_classes=classes)
        clips = torch.randn(batch, 3, getattr(args, "frames", 16), size, size)
        return model, (clips,), _cross_entropy, (torch.randint(0, classes, (batch,)),)
    if family == "optical_flow":
        model = builder(weights=None)
        first, second = torch.randn(batch, 3, size, size), torch.randn(batch, 3, size, size)
        return model, (first, second), _raft_loss, (torch.randn(batch, 2, size, size),)
    model = builder(num_classes=classes)
    labels = torch.randint(0, classes, (batch,))
    return model, (torch.randn(batch, 3, size, size),), _cross_entropy, (labels,)


def builtin_model(spec, args):
    """(model, example inputs, loss function, targets) for --model."""
    torch.manual_seed(0)
    if spec.startswith("torchvision:"):
        return torchvision_model(spec.split(":", 1)[1], args)
    if spec == "cnn":
        classes = getattr(args, "classes", None) or 1000
        model = SmallCNN(classes, getattr(args, "width", 16))
        images = torch.randn(args.batch, 3, args.image_size, args.image_size)
        labels = torch.randint(0, classes, (args.batch,))
        return model, (images,), _cross_entropy, (labels,)
    if spec == "transformer":
        model = TransformerStack(args.layers, args.d_model, args.heads, args.vocab)
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq))
        targets = torch.randint(0, args.vocab, (args.batch, args.seq))
        return model, (tokens,), _cross_entropy, (targets,)
    if ":" in spec:  # package.module:factory -> (model, inputs[, loss_fn[, targets]])
        module_name, factory = spec.split(":", 1)
        built = tuple(getattr(importlib.import_module(module_name), factory)())
        return built + (None, ())[len(built) - 2:]
    raise SystemExit(f"--model: expected torchvision:NAME, cnn, transformer or module:factory, got {spec!r}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m placement.torch_export",
                                     description="Export one PyTorch training step as a PlaceRequest.")
    parser.add_argument("--model", required=True,
                        help="torchvision:NAME (e.g. torchvision:resnet18, torchvision:fcn_resnet50, torchvision:r3d_18; "
                             "also torchvision:FAMILY.NAME), cnn, transformer, or module:factory")
    parser.add_argument("--out", required=True, help=".json, .json.gz or .pb")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image_size", type=int, default=224, help="torchvision models")
    parser.add_argument("--classes", type=int, default=None,
                        help="torchvision models, cnn (default: 1000; segmentation 21, video 400)")
    parser.add_argument("--frames", type=int, default=16, help="torchvision video models: frames per clip")
    parser.add_argument("--width", type=int, default=16, help="cnn: channels of the first convolutions")
    parser.add_argument("--layers", type=int, default=2, help="transformer")
    parser.add_argument("--d_model", type=int, default=256, help="transformer")
    parser.add_argument("--heads", type=int, default=4, help="transformer")
    parser.add_argument("--seq", type=int, default=128, help="transformer")
    parser.add_argument("--vocab", type=int, default=1000, help="transformer")
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZER_STATE_COPIES), default="sgd")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--device_kind", default="gpu")
    parser.add_argument("--device_memory_gib", type=float, default=16.0)
    parser.add_argument("--link_bandwidth_gbps", type=float, default=100.0, help="GB/s between devices")
    parser.add_argument("--link_latency_us", type=float, default=2.0)
    parser.add_argument("--peak_tflops", type=float, default=DEFAULT_PEAK_TFLOPS, help="roofline peak")
    parser.add_argument("--bandwidth_gbps", type=float, default=DEFAULT_BANDWIDTH_GBPS,
                        help="roofline memory bandwidth, GB/s")
    parser.add_argument("--launch_overhead_ns", type=int, default=DEFAULT_LAUNCH_OVERHEAD_NS)
    parser.add_argument("--profile", type=int, nargs="?", const=5, default=0, metavar="RUNS",
                        help="measure op times on this machine (median of RUNS runs, default 5) "
                             "instead of the roofline")
    parser.add_argument("--algorithm", default="", help="options.algorithm of the request")
    plan = parser.add_argument_group(
        "training plan (api.md section 2.1)",
        "Any of these makes the request a plan: the graph is one microbatch's step, the parameters, "
        "buffers and optimizer update are marked once_per_step, and the options carry the plan.")
    plan.add_argument("--microbatches", type=int, default=None, metavar="M",
                      help="export one microbatch of --batch / M samples (the batch must divide by M); the "
                           "loss is divided by M so that the summed gradients are the batch's")
    plan.add_argument("--max_in_flight", type=int, default=None, metavar="W",
                      help="options.max_in_flight: microbatches in flight at most (0 = the solver chooses)")
    plan.add_argument("--data_parallel", type=int, default=None, metavar="D",
                      help="options.data_parallel: replica groups (0 = the solver chooses; D must divide "
                           "--devices)")
    args = parser.parse_args(argv)
    if args.microbatches is not None and args.microbatches < 1:
        parser.error(f"--microbatches must be >= 1, got {args.microbatches}")
    if args.microbatches is not None and args.batch % args.microbatches:
        parser.error(f"--batch {args.batch} is not divisible by --microbatches {args.microbatches}: every "
                     f"microbatch must hold the same number of samples")

    model, inputs, loss_fn, targets = builtin_model(args.model, args)
    started = time.monotonic()
    plan_options = {name: getattr(args, name) for name in ("max_in_flight", "data_parallel")
                    if getattr(args, name) is not None}
    microbatches = args.microbatches
    if microbatches is None and plan_options:
        microbatches = 1  # a plan without microbatches (replicas, say)
    request = export_training_step(
        model, inputs, loss_fn, args.optimizer, targets, devices=args.devices, device_memory_gib=args.device_memory_gib,
        device_kind=args.device_kind, link_bandwidth_gbps=args.link_bandwidth_gbps,
        link_latency_us=args.link_latency_us, peak_tflops=args.peak_tflops, bandwidth_gbps=args.bandwidth_gbps,
        launch_overhead_ns=args.launch_overhead_ns, profile_runs=args.profile, algorithm=args.algorithm,
        microbatches=microbatches, **plan_options)
    write_request(request, args.out)
    graph = request["graph"]
    groups = {op["colocation_group"] for op in graph["ops"] if "colocation_group" in op}
    once = sum(1 for op in graph["ops"] if op.get("once_per_step"))
    plan_note = (f", microbatches of {args.batch // microbatches} samples x {microbatches}, {once} ops once per "
                 f"step" if microbatches is not None else "")
    print(f"{args.out}: {len(graph['ops'])} ops, {len(graph['edges'])} edges, {len(groups)} colocation groups"
          f"{plan_note} ({time.monotonic() - started:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
