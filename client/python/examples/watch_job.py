"""Submits a request as a long-running job, prints its progress as the server streams it, then the
result.

    python3 client/python/examples/watch_job.py --server=localhost:50051 \
        --request=tests/data/requests/bert_l3_training.json.gz --algorithm=m_etf

Needs the package (`pip install ./client/python`, or
PYTHONPATH=client/python:build/client/python/generated).
"""
import argparse

from placement.client import PlacementClient


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="localhost:50051")
    parser.add_argument("--request", required=True)
    parser.add_argument("--algorithm")
    parser.add_argument("--token")
    args = parser.parse_args()

    with PlacementClient(args.server, token=args.token) as client:
        operation = client.submit(args.request, algorithm=args.algorithm)
        print(f"submitted {operation.name}")
        for progress in client.watch(operation.name):
            best = f", best so far {progress.best_makespan_ns / 1e6:.3f} ms" if progress.best_makespan_ns else ""
            print(f"  {progress.stage or '-'} {100 * progress.fraction:5.1f}%{best}")
        result = client.wait(operation.name)
    print(f"done: step {result.makespan_ns / 1e6:.3f} ms, feasible={result.feasible}, by {result.algorithm}")


if __name__ == "__main__":
    main()
