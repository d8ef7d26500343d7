"""Placed plans run by four processes (gloo) equal the unplaced full-batch step: replica groups of two
devices, four devices without replicas, four replicas of one device (the ring all-reduce over four) (test_torch_dist.py has the cases, the helpers and the
tolerances; a file of its own so that each CTest test stays under a minute on a loaded 2-core machine)."""
import pytest

pytest.importorskip("torch")
pytest.importorskip("torch.fx.experimental.proxy_tensor")

from placement import shm_channel  # noqa: E402
from test_torch_dist import case, check_numerics, run_cases  # noqa: E402


def test_plans_on_four_processes_equal_the_unplaced_step(tmp_path, offline_binary):
    results = run_cases(tmp_path, 4, [
        case("transformer", "sgd", 2, 4, 2, "offline:m_etf", window=2),
        case("cnn", "adam", 4, 1, 1),
        case("transformer", "adam", 2, 1, 2),
        case("cnn", "sgd", 2, 4, 2, window=1),
        case("cnn", "sgd", 1, 2, 4),
        dict(case("cnn", "sgd", 2, 4, 2, window=2), ordered=True),  # NCCL's way of posting, on gloo
    ], offline_binary)
    check_numerics(results)
    # Rank 0's messages: through shared memory (within each replica group, gradients posted by the
    # all-reduce thread included), none where each replica has one device, gloo when ordered.
    shm = "shm" if shm_channel.usable() else "gloo"
    assert [r["transport"] for r in results] == [shm] * 4 + ["none", "gloo"]
    assert [r["all_reduce_transport"] for r in results] == [shm, "none", shm, shm, shm, "gloo"]
