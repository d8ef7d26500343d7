"""Unit tests of placement.client against an in-process fake PlacementService: retries and backoff,
RetryInfo / BadRequest details from the trailers, and the bearer token."""
from concurrent import futures

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("google.protobuf")

from google.protobuf import any_pb2  # noqa: E402
from placement.client import PlacementClient, PlacementError, RetryPolicy  # noqa: E402
from placement.v1 import operation_pb2, placement_service_pb2, placement_service_pb2_grpc  # noqa: E402


def status_details(code, message, retry_delay_s=None, violations=()):
    status = operation_pb2.Status(code=code.value[0], message=message)
    if retry_delay_s is not None:
        info = operation_pb2.RetryInfo()
        info.retry_delay.FromNanoseconds(int(retry_delay_s * 1e9))
        detail = any_pb2.Any()
        detail.Pack(info, type_url_prefix="type.googleapis.com/")
        status.details.append(detail)
    if violations:
        bad = operation_pb2.BadRequest(
            field_violations=[operation_pb2.FieldViolation(field=f, description=d) for f, d in violations])
        detail = any_pb2.Any()
        detail.Pack(bad, type_url_prefix="type.googleapis.com/")
        status.details.append(detail)
    return status.SerializeToString()


class FakeService(placement_service_pb2_grpc.PlacementServiceServicer):
    """ListAlgorithms fails with the scripted errors first, then answers; records every call's metadata."""

    def __init__(self):
        self.errors = []  # [(code, message, retry_delay_s, violations)]
        self.metadata = []

    def ListAlgorithms(self, request, context):
        self.metadata.append(dict(context.invocation_metadata()))
        if self.errors:
            code, message, delay, violations = self.errors.pop(0)
            context.set_trailing_metadata(
                [("grpc-status-details-bin", status_details(code, message, delay, violations))])
            context.abort(code, message)
        return placement_service_pb2.ListAlgorithmsResponse(
            algorithms=[placement_service_pb2.AlgorithmInfo(name="pardnn", version="1")])


@pytest.fixture
def fake():
    service = FakeService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    placement_service_pb2_grpc.add_PlacementServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    service.address = f"127.0.0.1:{port}"
    yield service
    server.stop(None)


def recording_client(address, **kwargs):
    client = PlacementClient(address, **kwargs)
    client.slept = []
    client._sleep = client.slept.append  # no real waiting in unit tests
    return client


def test_unavailable_is_retried_with_exponential_backoff(fake):
    fake.errors = [(grpc.StatusCode.UNAVAILABLE, "queue is full", None, ())] * 3
    client = recording_client(fake.address, retry=RetryPolicy(initial_backoff=0.1, multiplier=2, jitter=0))
    assert [a.name for a in client.list_algorithms()] == ["pardnn"]
    assert client.slept == pytest.approx([0.1, 0.2, 0.4])
    assert len(fake.metadata) == 4


def test_retry_info_sets_the_least_delay(fake):
    fake.errors = [(grpc.StatusCode.UNAVAILABLE, "draining", 2.5, ())]
    client = recording_client(fake.address, retry=RetryPolicy(initial_backoff=0.1, jitter=0.2))
    client.list_algorithms()
    assert client.slept == [2.5]


def test_jitter_stays_within_its_band(fake):
    fake.errors = [(grpc.StatusCode.UNAVAILABLE, "busy", None, ())] * 4
    client = recording_client(fake.address, retry=RetryPolicy(initial_backoff=1.0, multiplier=1, jitter=0.2))
    client.list_algorithms()
    assert len(client.slept) == 4
    assert all(0.8 <= s <= 1.2 for s in client.slept)


def test_gives_up_after_max_attempts_with_the_servers_error(fake):
    fake.errors = [(grpc.StatusCode.UNAVAILABLE, "queue is full", 0.5, ())] * 5
    client = recording_client(fake.address, retry=RetryPolicy(max_attempts=2))
    with pytest.raises(PlacementError) as raised:
        client.list_algorithms()
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert raised.value.message == "queue is full"
    assert raised.value.retry_delay == pytest.approx(0.5)
    assert len(client.slept) == 1


def test_no_retry_past_the_deadline(fake):
    fake.errors = [(grpc.StatusCode.UNAVAILABLE, "busy", 30.0, ())] * 2
    client = recording_client(fake.address, timeout=5)
    with pytest.raises(PlacementError) as raised:
        client.list_algorithms()
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert client.slept == [], "a 30 s hint does not fit a 5 s deadline"


def test_other_errors_are_not_retried_and_carry_field_violations(fake):
    fake.errors = [(grpc.StatusCode.INVALID_ARGUMENT, "bad graph", None,
                    [("graph.edges[3].dst", "out of range")])]
    client = recording_client(fake.address)
    with pytest.raises(PlacementError) as raised:
        client.list_algorithms()
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.field_violations == [("graph.edges[3].dst", "out of range")]
    assert client.slept == []
    assert str(raised.value) == "INVALID_ARGUMENT: bad graph"


def test_token_is_sent_as_a_bearer_header(fake):
    recording_client(fake.address, token="s3cret").list_algorithms()
    recording_client(fake.address).list_algorithms()
    assert fake.metadata[0].get("authorization") == "Bearer s3cret"
    assert "authorization" not in fake.metadata[1]


def test_tls_channel_trusts_the_given_ca(tmp_path):
    """tls_ca makes the channel TLS with that CA as the only root: a server with a certificate it signed
    is reached, the same server is not reached without it (plaintext)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    service = FakeService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    placement_service_pb2_grpc.add_PlacementServiceServicer_to_server(service, server)
    credentials = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
    port = server.add_secure_port("localhost:0", credentials)
    server.start()
    try:
        with PlacementClient(f"localhost:{port}", tls_ca=cert, token="t") as secure:
            assert [a.name for a in secure.list_algorithms(timeout=10)] == ["pardnn"]
        assert service.metadata[-1].get("authorization") == "Bearer t"
        plain = recording_client(f"localhost:{port}", timeout=3, retry=RetryPolicy(max_attempts=1))
        with pytest.raises(PlacementError) as raised:
            plain.list_algorithms()
        assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop(None)
