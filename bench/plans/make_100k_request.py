#!/usr/bin/env python3
"""The 100K-op request of the `auto` speed figure (bench/README.md, "Plans on real PyTorch steps"):
the importers' BERT-L12 training step scaled to 100K ops (`placement_corpus bert --ops=100000`, 16
devices), cut to its first 8 devices with 256 TiB each, so that memory cannot bind (the speed target is
for K = 8, M = 16, memory not binding).

    build/bench/corpus/placement_corpus bert --ops=100000 --out=/tmp/bert_100k.pb
    PYTHONPATH=client/python:build/client/python/generated \\
        python3 bench/plans/make_100k_request.py /tmp/bert_100k.pb /tmp/bert_100k_k8.pb
    build/service/offline/placement_offline place --request=/tmp/bert_100k_k8.pb --algorithm=auto \\
        --microbatches=16 --format=summary
"""
import sys

from placement.v1 import placement_pb2


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: make_100k_request.py IN.pb OUT.pb")
    request = placement_pb2.PlaceRequest()
    with open(argv[1], "rb") as f:
        request.ParseFromString(f.read())
    del request.cluster.devices[8:]
    for device in request.cluster.devices:
        device.memory_bytes = 1 << 48
    with open(argv[2], "wb") as f:
        f.write(request.SerializeToString())
    print(f"{argv[2]}: {len(request.graph.ops)} ops, {len(request.graph.edges)} edges, "
          f"{len(request.cluster.devices)} devices")


if __name__ == "__main__":
    main(sys.argv)
