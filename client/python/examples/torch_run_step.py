"""Places a small CNN's training step on two devices and runs it there, next to the unplaced step.

    python3 client/python/examples/torch_run_step.py --offline=build/service/offline/placement_offline

(the package installed, or PYTHONPATH=client/python:build/client/python/generated; also
[--server=HOST:PORT] [--algorithm=NAME] instead of --offline).

With neither flag the placement is a round-robin one computed here (numerics hold for any placement).
Devices are CUDA devices when there are two, otherwise two CPU workers.
"""
import argparse

import torch

from placement import torch_run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--offline", help="placement_offline binary")
    parser.add_argument("--server", help="placement_server address")
    parser.add_argument("--algorithm", default="", help="placement algorithm (default: the placer's)")
    args, _ = parser.parse_known_args()  # flags meant for the other examples (--request) are ignored

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
    images, labels = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))

    def loss_fn(output, targets):
        return torch.nn.functional.cross_entropy(output, targets[0])

    traced = torch_run.trace(model, (images,), loss_fn, "sgd", (labels,))
    request = traced.request(devices=2)
    if args.offline:
        placement = torch_run.place_offline(args.offline, request, args.algorithm)
    elif args.server:
        placement = torch_run.place_server(args.server, request, args.algorithm)
    else:
        placement = [i % 2 for i in range(len(request["graph"]["ops"]))]
        for i, op in enumerate(request["graph"]["ops"]):  # a colocation group goes where its first op went
            first = next(j for j, o in enumerate(request["graph"]["ops"])
                         if o.get("colocation_group") == op.get("colocation_group"))
            placement[i] = placement[first] if op.get("colocation_group") else placement[i]

    placed = torch_run.PlacedStep(traced, request, placement)
    unplaced = torch_run.UnplacedStep(traced)
    same = True
    for step in range(3):
        loss, expected = placed.run((images,), (labels,)), unplaced.run((images,), (labels,))
        same = same and torch.allclose(loss, expected)
        timing = placed.last_timing
        print(f"step {step}: loss {float(loss):.5f} (unplaced {float(expected):.5f}), "
              f"{timing.wall_ns / 1e6:.1f} ms, {timing.copies} cross-device copies")
    same = same and all(torch.allclose(placed.parameters()[name].cpu(), value)
                        for name, value in unplaced.parameters().items())
    print(f"devices: {[str(d) for d in placed.devices]}; same as unplaced: {same}")


if __name__ == "__main__":
    main()
