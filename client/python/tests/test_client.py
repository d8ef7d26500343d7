"""End-to-end tests of placement.client against a real placement_server."""
import time

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("google.protobuf")

from conftest import SOURCE_DIR, ServerProcess, binary  # noqa: E402
from placement.client import PlacementClient, PlacementError, RetryPolicy, TrainingPlan, load_request  # noqa: E402
from placement.v1 import placement_pb2  # noqa: E402


def slow_request(path, seconds, seed):
    """A request the server's `testing_wait` algorithm holds a worker with for `seconds`."""
    request = load_request(path)
    request.options.algorithm = "testing_wait"
    request.options.seed = seed
    request.options.time_limit.FromNanoseconds(int(seconds * 1e9))
    return request


@pytest.fixture(scope="module")
def testing_server():
    process = ServerProcess(binary("PLACEMENT_SERVER_BINARY"), ["--workers=2", "--testing_algorithms"])
    yield process
    process.stop()


@pytest.fixture
def client(testing_server):
    with PlacementClient(testing_server.address, timeout=60) as c:
        c.wait_for_ready()
        yield c


def test_place_returns_a_typed_result_and_caches(client, three_ops_path):
    result = client.place(three_ops_path, algorithm="pardnn")
    assert result.feasible, result.reason
    assert len(result.device) == 3
    assert all(0 <= d < 2 for d in result.device)
    assert result.makespan_ns >= result.lower_bound_ns > 0
    assert [d.name for d in result.devices] == ["gpu0", "gpu1"]
    assert sum(d.op_count for d in result.devices) == 3
    assert result.algorithm == "pardnn"
    assert result.cache in ("MISS", "HIT")
    assert set(result.assignment(load_request(three_ops_path))) == {"a", "b", "c"}
    again = client.place(three_ops_path, algorithm="pardnn")
    assert again.cache == "HIT"
    assert again.device == result.device


def test_algorithm_override(client, three_ops_path):
    result = client.place(load_request(three_ops_path), algorithm="round_robin")
    assert result.algorithm == "round_robin"


def test_invalid_request_raises_with_field_violations(client, three_ops_path):
    request = load_request(three_ops_path)
    request.graph.edges[0].dst = 7
    with pytest.raises(PlacementError) as raised:
        client.place(request)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert any(field.startswith("graph.edges[0]") for field, _ in raised.value.field_violations)


def test_submit_watch_wait(client, three_ops_path):
    operation = client.submit(slow_request(three_ops_path, 0.5, seed=int(time.time_ns())))
    assert operation.name.startswith("operations/")
    updates = list(client.watch(operation.name, timeout=30))
    assert updates, "at least the final update"
    assert updates[-1].done
    assert all(0.0 <= u.fraction <= 1.0 for u in updates)
    result = client.wait(operation.name, timeout=30)
    assert len(result.device) == 3
    assert client.get_operation(operation.name).done


def test_wait_times_out_on_a_running_job_and_cancel_ends_it(client, three_ops_path):
    operation = client.submit(slow_request(three_ops_path, 60, seed=int(time.time_ns())))
    with pytest.raises(PlacementError) as raised:
        client.wait(operation.name, timeout=0.5)
    assert raised.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    client.cancel(operation.name)
    with pytest.raises(PlacementError) as cancelled:
        client.wait(operation.name, timeout=30)
    assert cancelled.value.code == grpc.StatusCode.CANCELLED


def test_unknown_operation_is_not_found(client):
    with pytest.raises(PlacementError) as raised:
        client.get_operation("operations/does-not-exist")
    assert raised.value.code == grpc.StatusCode.NOT_FOUND


def test_evaluate(client, three_ops_path):
    result, violations = client.evaluate(three_ops_path, [0, 0, 0])
    assert result.feasible
    assert violations == []
    assert result.devices[0].op_count == 3
    with pytest.raises(PlacementError) as raised:
        client.evaluate(three_ops_path, [0, 0, 5])
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert any(field.startswith("device") for field, _ in raised.value.field_violations)


def test_replacement_passes_the_previous_placement(client, three_ops_path):
    """Re-placement: the previous placement ({op: device}) and the move weight go out with the request
    (their own digest); the answer says what moved; the caller's request is not modified."""
    request = load_request(three_ops_path)
    fresh = client.place(request)
    assert fresh.ops_moved == 0 and fresh.bytes_moved == 0
    previous = fresh.assignment(request)
    kept = client.place(request, previous_placement=previous, move_weight_ns_per_byte=1e9)
    assert len(request.options.previous_placement) == 0 and request.options.move_weight_ns_per_byte == 0
    assert kept.request_digest != fresh.request_digest
    assert kept.ops_moved == 0 and kept.bytes_moved == 0 and kept.feasible
    # Every op's device left: all of them move, and each is on a device still there. Without the list
    # of departed devices that is taken for names that do not match.
    gone = {op: "retired-" + device for op, device in previous.items()}
    with pytest.raises(PlacementError) as unlisted:
        client.place(request, previous_placement=gone)
    assert [field for field, _ in unlisted.value.field_violations] == ["options.previous_placement"]
    moved = client.place(request, previous_placement=gone, departed_devices=sorted(set(gone.values())))
    assert moved.ops_moved == len(request.graph.ops) and moved.feasible
    assert moved.bytes_moved == sum(op.persistent_bytes for op in request.graph.ops)
    with pytest.raises(PlacementError) as raised:
        client.place(request, previous_placement={"no-such-op": "gpu0"}, move_weight_ns_per_byte=-1)
    fields = {field for field, _ in raised.value.field_violations}
    assert fields == {'options.previous_placement["no-such-op"]', "options.move_weight_ns_per_byte"}


def test_training_plan_options_and_result(client, three_ops_path):
    """Plan options on place, submit and evaluate (api.md section 2.1): the answer says what was used and
    its throughput; the caller's request is not modified."""
    request = load_request(three_ops_path)
    plain = client.place(request, algorithm="m_etf")
    assert plain.plan == TrainingPlan(1, 1, 1)
    assert plain.microbatches_per_second == pytest.approx(1e9 / plain.makespan_ns)

    planned = client.place(request, algorithm="m_etf", microbatches=4, max_in_flight=2)
    assert request.options.microbatches == 0 and request.options.algorithm == ""
    assert planned.plan == TrainingPlan(4, 2, 1)
    assert planned.request_digest != plain.request_digest
    assert planned.makespan_ns > plain.makespan_ns  # four microbatches take longer than one
    assert planned.microbatches_per_second == pytest.approx(4e9 / planned.makespan_ns)

    # Two replica groups of one device each: every op on group 0's only device.
    replicated = client.place(request, algorithm="m_etf", microbatches=4, data_parallel=2)
    assert replicated.plan.data_parallel == 2 and set(replicated.device) == {0}
    assert len(replicated.devices) == 1  # group 0's devices
    assert replicated.microbatches_per_second == pytest.approx(8e9 / replicated.makespan_ns)
    chosen = client.place(request, algorithm="m_etf", microbatches=8, max_in_flight=0, data_parallel=0)
    assert chosen.plan.microbatches == 8 and chosen.plan.data_parallel in (1, 2)
    assert 1 <= chosen.plan.max_in_flight <= 8

    operation = client.submit(request, algorithm="m_etf", microbatches=4, max_in_flight=4)
    submitted = client.wait(operation.name, timeout=30)
    assert submitted.plan == TrainingPlan(4, 4, 1)

    evaluated, violations = client.evaluate(request, [0, 1, 0], microbatches=4, max_in_flight=1)
    assert violations == [] and evaluated.plan == TrainingPlan(4, 1, 1)
    single, _ = client.evaluate(request, [0, 1, 0])
    assert evaluated.makespan_ns > single.makespan_ns

    with pytest.raises(PlacementError) as raised:
        client.place(request, microbatches=8, max_in_flight=9)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in raised.value.field_violations] == ["options.max_in_flight"]
    with pytest.raises(PlacementError) as raised:
        client.place(request, data_parallel=3)
    assert [field for field, _ in raised.value.field_violations] == ["options.data_parallel"]


def test_recommend_sizes_the_job_and_every_candidate_is_a_cached_placement(client):
    """Recommend (issue 25) on the real BERT-3 training step: one row per count and data-parallel split,
    each fetched again by place() from the cache with the same step; the recommendation is the fastest
    row that fits; an objective without its threshold is INVALID_ARGUMENT naming the field."""
    step = SOURCE_DIR / "tests" / "data" / "requests" / "bert_l3_training.json.gz"
    request = client.recommend_request(step, algorithm="round_robin", microbatches=4)
    answer = client.recommend(request)
    pool = len(request.cluster.devices)
    assert len(answer.candidates) == sum(1 for n in range(1, pool + 1) for d in range(1, n + 1) if n % d == 0)
    for row in answer.candidates:
        assert row.error is None and len(row.device_names) == row.devices
        again = client.place(row.request(request))
        assert again.cache == "HIT" and again.request_digest == row.request_digest
        assert again.makespan_ns == row.step_ns
        assert row.time_limit_ns > 0 and not row.time_limited  # round_robin is never cut short
    assert answer.refined == 0  # so no contender is re-solved
    fitting = [r for r in answer.candidates if r.feasible]
    assert answer.best is max(fitting, key=lambda r: r.microbatches_per_second)
    assert answer.candidates[0].speedup == pytest.approx(1.0)

    repeat = client.recommend(step, algorithm="round_robin", microbatches=4, objective="fewest_within",
                              within_percent=50)
    assert repeat.cache_hits == len(answer.candidates)
    assert repeat.best.devices <= answer.best.devices

    with pytest.raises(PlacementError) as raised:
        client.recommend(step, objective="fewest_within")
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in raised.value.field_violations] == ["within_percent"]
    with pytest.raises(ValueError):
        client.recommend(step, objective="cheapest")


def test_recommend_with_a_previous_placement_resizes_from_it(client):
    """A re-sizing question: Recommend with the job's previous placement (half its ops on a device that
    left); every candidate re-places from it, and row.request() lists the candidate's departed devices
    so that placing it again is the same request (a cache hit)."""
    step = SOURCE_DIR / "tests" / "data" / "requests" / "bert_l3_training.json.gz"
    request = client.recommend_request(step, algorithm="round_robin", max_devices=2)
    first = request.cluster.devices[0].name
    request.options.previous_placement.update(
        {op.name: first if i % 2 else "gone" for i, op in enumerate(request.graph.ops)})
    answer = client.recommend(request)
    assert len(answer.candidates) == 3
    for row in answer.candidates:
        assert row.error is None
        again = client.place(row.request(request))
        assert again.cache == "HIT" and again.request_digest == row.request_digest
        assert again.ops_moved >= len(request.graph.ops) // 2


def test_list_algorithms_and_health(client):
    names = [a.name for a in client.list_algorithms()]
    assert "pardnn" in names and "round_robin" in names
    assert client.health() == "SERVING"


def test_unreachable_server_is_unavailable_after_retries():
    with PlacementClient("127.0.0.1:1", timeout=5,
                         retry=RetryPolicy(max_attempts=2, initial_backoff=0.01)) as c:
        with pytest.raises(PlacementError) as raised:
            c.list_algorithms()
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE


def test_full_queue_is_retried_after_the_servers_retry_hint(three_ops_path):
    server = ServerProcess(binary("PLACEMENT_SERVER_BINARY"),
                           ["--workers=1", "--max_queued_jobs=1", "--testing_algorithms", "--retry_delay=1s"])
    try:
        with PlacementClient(server.address, timeout=60) as c:
            running = c.submit(slow_request(three_ops_path, 1.5, seed=1))
            for update in c.watch(running.name, timeout=30):
                if update.stage != "queued" or update.done:
                    break
            c.submit(slow_request(three_ops_path, 1.5, seed=2))  # fills the queue

            impatient = PlacementClient(server.address, timeout=10, retry=RetryPolicy(max_attempts=1))
            with pytest.raises(PlacementError) as raised:
                impatient.place(three_ops_path, algorithm="round_robin")
            impatient.close()
            assert raised.value.code == grpc.StatusCode.UNAVAILABLE
            assert raised.value.retry_delay == pytest.approx(1.0)

            slept = []
            real_sleep = c._sleep
            c._sleep = lambda seconds: (slept.append(seconds), real_sleep(seconds))
            result = c.place(three_ops_path, algorithm="round_robin")
            assert len(result.device) == 3
            assert slept, "the first attempt was rejected, so the client waited"
            assert min(slept) >= 1.0, "every wait honours the 1 s RetryInfo hint"
    finally:
        server.stop()


@pytest.mark.parametrize("example", ["place_file.py", "watch_job.py"])
def test_examples_run(example, testing_server, three_ops_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "examples" / example
    completed = subprocess.run(
        [sys.executable, str(script), f"--server={testing_server.address}", f"--request={three_ops_path}",
         "--algorithm=round_robin"], capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert completed.returncode == 0, completed.stderr
    assert "round_robin" in completed.stdout


def test_token_against_a_server_with_tokens(tmp_path, three_ops_path):
    """Runs once the server checks bearer tokens (--auth_tokens, the `security` work): a known token is
    accepted, a missing or unknown one is UNAUTHENTICATED."""
    from conftest import server_knows_flag

    server_binary = binary("PLACEMENT_SERVER_BINARY")
    if not server_knows_flag(server_binary, "auth_tokens"):
        pytest.skip("this placement_server has no --auth_tokens")
    token = "python-client-test-token-0123456789"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{token} team-python\n")
    server = ServerProcess(server_binary, [f"--auth_tokens={tokens}"])
    try:
        with PlacementClient(server.address, token=token, timeout=60) as c:
            assert len(c.place(three_ops_path).device) == 3
        for wrong in (None, "not-the-right-token-0123456789"):
            with PlacementClient(server.address, token=wrong, timeout=10) as c:
                with pytest.raises(PlacementError) as raised:
                    c.place(three_ops_path)
                assert raised.value.code == grpc.StatusCode.UNAUTHENTICATED
    finally:
        server.stop()


def _reflection_call(address, request_bytes):
    """One request on the server reflection stream (grpc.reflection.v1alpha, what gRPC 1.51 serves and
    grpcurl uses), with hand-encoded protobuf bytes: Debian ships no Python reflection stubs."""
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw)
        return b"".join(call(iter([request_bytes]), timeout=30))


def test_reflection_lists_the_services_and_serves_their_descriptors(testing_server):
    # ServerReflectionRequest{list_services: ""}: field 7, length-delimited, empty.
    listing = _reflection_call(testing_server.address, b"\x3a\x00")
    for service in (b"placement.v1.PlacementService", b"grpc.health.v1.Health"):
        assert service in listing, listing
    # ServerReflectionRequest{file_containing_symbol: "placement.v1.PlacementService"}: field 4.
    symbol = b"placement.v1.PlacementService"
    descriptor = _reflection_call(testing_server.address, b"\x22" + bytes([len(symbol)]) + symbol)
    assert b"placement/v1/placement_service.proto" in descriptor, descriptor[:200]
    assert b"SubmitPlacement" in descriptor and b"WatchOperation" in descriptor
