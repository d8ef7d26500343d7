"""Places a request file on a running server and prints where each op goes.

    python3 client/python/examples/place_file.py --server=localhost:50051 \
        --request=tests/data/offline/three_ops.json

Options: --algorithm=NAME, --token=TOKEN, --tls_ca=ca.pem. Needs the package (`pip install
./client/python`, or PYTHONPATH=client/python:build/client/python/generated).
"""
import argparse

from placement.client import PlacementClient, PlacementError, load_request


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="localhost:50051")
    parser.add_argument("--request", required=True)
    parser.add_argument("--algorithm")
    parser.add_argument("--token")
    parser.add_argument("--tls_ca")
    args = parser.parse_args()

    request = load_request(args.request)
    with PlacementClient(args.server, token=args.token, tls_ca=args.tls_ca) as client:
        try:
            result = client.place(request, algorithm=args.algorithm)
        except PlacementError as error:
            print(error)
            for field, description in error.field_violations:
                print(f"  {field}: {description}")
            raise SystemExit(1)
    print(f"{'feasible' if result.feasible else 'INFEASIBLE: ' + result.reason}; "
          f"step {result.makespan_ns / 1e6:.3f} ms (lower bound {result.lower_bound_ns / 1e6:.3f} ms) "
          f"by {result.algorithm}, cache {result.cache}")
    for device in result.devices:
        print(f"  {device.name}: {device.op_count} ops, busy {device.busy_ns / 1e6:.3f} ms, "
              f"peak {device.peak_memory_bytes / 2**20:.1f} MiB of {device.capacity_bytes / 2**20:.1f} MiB")
    for op, device in list(result.assignment(request).items())[:20]:
        print(f"  {op} -> {device}")


if __name__ == "__main__":
    main()
