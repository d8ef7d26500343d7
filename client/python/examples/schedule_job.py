"""A cluster scheduler's side of the service: size a job, place it, lose a device, re-place it.

    python3 client/python/examples/schedule_job.py --server=localhost:50051 \
        --request=tests/data/requests/bert_l3_training.json.gz --microbatches=8

1. Recommend: how many of the request's devices (the pool) the job should get — every count placed as
   an ordinary cached request, the fewest devices within 10 % of the fastest recommended.
2. Place the job on those devices: a cache hit, Recommend placed it already.
3. One of its devices fails. Re-place the job on the others with the previous placement, trading step
   time for bytes moved: only what must move (and what pays for itself) moves.
"""
import argparse

from placement.client import PlacementClient, load_request


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="localhost:50051")
    parser.add_argument("--request", required=True, help="a PlaceRequest file; its cluster is the pool")
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--within_percent", type=float, default=10.0)
    parser.add_argument("--move_weight_ns_per_byte", type=float, default=0.01,
                        help="step time traded for one byte moved (0.01 ns/B: 100 MB moved ~ 1 ms of step)")
    args = parser.parse_args()

    with PlacementClient(args.server) as client:
        pool = load_request(args.request)
        # 1. How many devices? One replica here, so that a lost device can be replaced in place.
        sizing = client.recommend_request(pool, microbatches=args.microbatches, data_parallel=1,
                                          objective="fewest_within", within_percent=args.within_percent)
        answer = client.recommend(sizing)
        for row in answer.candidates:
            print(f"{row.devices} device(s): {row.microbatches_per_second:8.2f} microbatches/s, "
                  f"{row.speedup:.2f}x, fits: {row.feasible}")
        best = answer.best
        if best is None:
            raise SystemExit("no candidate fits")
        print(f"recommended: {answer.reason}")

        # 2. Place the job on the recommended devices (answered from the cache).
        job = best.request(sizing)
        placed = client.place(job)
        print(f"placed on {', '.join(best.device_names)}: step {placed.makespan_ns / 1e6:.3f} ms "
              f"(cache {placed.cache})")

        # 3. A device fails: the job keeps the others, and its previous placement.
        if len(job.cluster.devices) < 2:
            print("one device only: nothing to re-place onto")
            return
        lost = job.cluster.devices[len(job.cluster.devices) - 1].name
        previous = placed.assignment(job)
        on_lost = {op for op, device in previous.items() if device == lost}
        lost_bytes = sum(op.persistent_bytes for op in job.graph.ops if op.name in on_lost)
        smaller = type(job)()
        smaller.CopyFrom(job)
        del smaller.cluster.devices[len(smaller.cluster.devices) - 1]
        replaced = client.place(smaller, previous_placement=previous, departed_devices=[lost],
                                move_weight_ns_per_byte=args.move_weight_ns_per_byte)
        print(f"lost {lost} ({len(on_lost)} ops, {lost_bytes} persistent bytes); re-placed: step "
              f"{replaced.makespan_ns / 1e6:.3f} ms, moved {replaced.ops_moved} ops and "
              f"{replaced.bytes_moved} bytes, fits: {replaced.feasible}")
        assert replaced.ops_moved >= len(on_lost)


if __name__ == "__main__":
    main()
