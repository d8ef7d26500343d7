"""PlacementClient: a small, typed Python client of placement.v1.PlacementService.

Every call has a deadline; calls that the server may reject while busy (UNAVAILABLE: queue full or
draining) are retried with exponential backoff and jitter, waiting at least as long as the server's
RetryInfo detail asks and never past the call's deadline. Errors are raised as PlacementError, which
carries the status code, the message, the field violations of a BadRequest detail and the retry hint.

Requests may be given as PlaceRequest messages or as file names (``.json``, ``.json.gz``, ``.pb``), the
same files ``placement_offline`` and ``placementctl`` read.
"""
import dataclasses
import gzip
import random
import time
from pathlib import Path
from typing import Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import json_format

from placement.v1 import operation_pb2
from placement.v1 import placement_pb2
from placement.v1 import placement_service_pb2
from placement.v1 import placement_service_pb2_grpc

_TYPE_PREFIX = "type.googleapis.com/"
_DETAILS_KEY = "grpc-status-details-bin"
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}

RequestLike = Union[placement_pb2.PlaceRequest, str, Path]


class PlacementError(Exception):
    """A failed call: `code` (grpc.StatusCode), `message`, `field_violations` [(field, description)]
    from a BadRequest detail, and `retry_delay` (seconds) from a RetryInfo detail, or None."""

    def __init__(self, code, message, field_violations=(), retry_delay=None):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.field_violations = list(field_violations)
        self.retry_delay = retry_delay


@dataclasses.dataclass(frozen=True)
class DeviceMetrics:
    name: str
    op_count: int
    busy_ns: int
    peak_memory_bytes: int
    capacity_bytes: int
    peak_time_ns: int


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """How the step runs (api.md section 2.1): M microbatches, at most W in flight, D data-parallel
    replica groups. A result's plan has the solver's choices filled in."""

    microbatches: int = 1
    max_in_flight: int = 1
    data_parallel: int = 1


@dataclasses.dataclass(frozen=True)
class PlacementResult:
    """A Placement with its fields flattened; `proto` keeps the message itself."""

    device: List[int]  # device index per op, in the request's op order
    feasible: bool
    reason: str
    makespan_ns: int
    lower_bound_ns: int
    transfer_bytes: int
    transfer_count: int
    devices: List[DeviceMetrics]
    algorithm: str  # the algorithm that produced it (the winner for "auto")
    cache: str  # MISS, HIT, COALESCED or "" (Evaluate)
    request_digest: str
    solve_ns: int
    plan: TrainingPlan  # what the step was simulated with (the solver's W and D filled in)
    microbatches_per_second: float  # data_parallel x microbatches / step
    # Re-placement (previous_placement given): ops whose device changed and the persistent bytes they move.
    ops_moved: int
    bytes_moved: int
    proto: placement_pb2.Placement = dataclasses.field(repr=False, compare=False)

    @staticmethod
    def from_proto(placement, device_names: Sequence[str] = ()) -> "PlacementResult":
        metrics = placement.metrics
        devices = [
            DeviceMetrics(
                name=device_names[i] if i < len(device_names) else str(i),
                op_count=m.op_count,
                busy_ns=m.busy_ns,
                peak_memory_bytes=m.peak_memory_bytes,
                capacity_bytes=m.capacity_bytes,
                peak_time_ns=m.peak_time_ns,
            )
            for i, m in enumerate(metrics.devices)
        ]
        provenance = placement.provenance
        # A plan left unset (an answer of a server without plans) is the plain step: 1, 1, 1.
        plan = TrainingPlan(max(placement.plan.microbatches, 1), max(placement.plan.max_in_flight, 1),
                            max(placement.plan.data_parallel, 1))
        return PlacementResult(
            device=list(placement.device),
            feasible=placement.outcome == placement_pb2.FEASIBLE,
            reason=placement.reason,
            makespan_ns=metrics.makespan_ns,
            lower_bound_ns=metrics.lower_bound_ns,
            transfer_bytes=metrics.transfer_bytes,
            transfer_count=metrics.transfer_count,
            devices=devices,
            algorithm=provenance.algorithm,
            cache=placement_pb2.CacheResult.Name(provenance.cache) if provenance.cache else "",
            request_digest=provenance.request_digest,
            solve_ns=provenance.solve_ns,
            plan=plan,
            microbatches_per_second=metrics.microbatches_per_second,
            ops_moved=metrics.ops_moved,
            bytes_moved=metrics.bytes_moved,
            proto=placement,
        )

    def assignment(self, request: placement_pb2.PlaceRequest) -> dict:
        """{op name: device name} for the request this result answers."""
        names = [d.name for d in request.cluster.devices]
        return {op.name: names[d] for op, d in zip(request.graph.ops, self.device)}


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One row of a Recommend answer: `devices` of the pool in `data_parallel` replicas."""

    devices: int
    data_parallel: int
    microbatches: int
    max_in_flight: int
    step_ns: int
    microbatches_per_second: float
    speedup: float  # over the one-device candidate
    efficiency: float  # speedup / devices
    feasible: bool
    device_names: List[str]  # the pool's devices it uses, replica group 0 first
    request_digest: str  # its placement's cache key
    cache: str  # MISS, HIT, COALESCED
    winner: str
    operation: str  # submit_only: its operation's name
    error: Optional["PlacementError"]  # the candidate had no answer (e.g. a pin outside its devices)
    placement: Optional[PlacementResult]  # with include_placements
    time_limit_ns: int = 0  # the time limit its answer was solved under
    time_limited: bool = False  # that limit cut the solve short

    def request(self, recommend_request: "placement_service_pb2.RecommendRequest") -> placement_pb2.PlaceRequest:
        """The candidate as a plain PlaceRequest: placing it is answered from the cache."""
        place = placement_pb2.PlaceRequest(graph=recommend_request.graph, options=recommend_request.options)
        place.cluster.CopyFrom(recommend_request.cluster)
        del place.cluster.devices[:]
        by_name = {d.name: d for d in recommend_request.cluster.devices}
        for name in self.device_names:
            place.cluster.devices.append(by_name[name])
        place.options.ClearField("data_parallel")
        if self.data_parallel > 1:
            place.options.data_parallel = self.data_parallel
        if place.options.previous_placement:
            # A re-sizing question: the previous placement's devices outside this candidate left it.
            departed = set(place.options.departed_devices)
            departed.update(d for d in place.options.previous_placement.values() if d not in self.device_names)
            del place.options.departed_devices[:]
            place.options.departed_devices.extend(sorted(departed))
        return place


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """A Recommend answer: every candidate, and the index of the recommended one (None: none fits)."""

    candidates: List[Candidate]
    recommended: Optional[int]
    reason: str
    elapsed_ns: int
    cache_hits: int
    proto: "placement_service_pb2.RecommendResponse" = dataclasses.field(repr=False, compare=False)
    refined: int = 0  # contenders given a second, longer solve

    @property
    def best(self) -> Optional[Candidate]:
        return None if self.recommended is None else self.candidates[self.recommended]


_OBJECTIVES = {
    "fastest": placement_service_pb2.RECOMMEND_OBJECTIVE_FASTEST,
    "fewest_within": placement_service_pb2.RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN,
    "best_per_device": placement_service_pb2.RECOMMEND_OBJECTIVE_BEST_PER_DEVICE,
}


@dataclasses.dataclass(frozen=True)
class Progress:
    """One progress update of an operation."""

    operation: str
    stage: str
    fraction: float
    best_makespan_ns: int
    done: bool


@dataclasses.dataclass(frozen=True)
class Operation:
    name: str
    done: bool
    progress: Progress
    result: Optional[PlacementResult]  # when done and successful
    error: Optional[PlacementError]  # when done and failed

    @staticmethod
    def from_proto(operation, device_names: Sequence[str] = ()) -> "Operation":
        result = None
        error = None
        if operation.HasField("response"):
            result = PlacementResult.from_proto(operation.response.placement, device_names)
        elif operation.HasField("error"):
            error = _error_from_status_proto(operation.error)
        m = operation.metadata
        progress = Progress(operation.name, m.stage, m.fraction, m.best_makespan_ns, operation.done)
        return Operation(operation.name, operation.done, progress, result, error)


@dataclasses.dataclass(frozen=True)
class AlgorithmInfo:
    name: str
    description: str
    version: str


def load_request(path: Union[str, Path]) -> placement_pb2.PlaceRequest:
    """Reads a PlaceRequest file: protobuf JSON (``.json``, ``.json.gz``) or binary (``.pb``)."""
    path = Path(path)
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    request = placement_pb2.PlaceRequest()
    if path.name.endswith(".pb") or path.name.endswith(".pb.gz"):
        request.ParseFromString(data)
    else:
        json_format.Parse(data.decode("utf-8"), request)
    return request


def _error_from_status_proto(status) -> PlacementError:
    violations = []
    retry_delay = None
    for detail in status.details:
        type_name = detail.type_url[len(_TYPE_PREFIX):] if detail.type_url.startswith(_TYPE_PREFIX) else ""
        if type_name == "placement.v1.BadRequest":
            bad = operation_pb2.BadRequest()
            bad.ParseFromString(detail.value)
            violations.extend((v.field, v.description) for v in bad.field_violations)
        elif type_name == "placement.v1.RetryInfo":
            info = operation_pb2.RetryInfo()
            info.ParseFromString(detail.value)
            retry_delay = info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    try:
        code = next(c for c in grpc.StatusCode if c.value[0] == status.code)
    except StopIteration:
        code = grpc.StatusCode.UNKNOWN
    return PlacementError(code, status.message, violations, retry_delay)


def _error_from_rpc(error: grpc.RpcError) -> PlacementError:
    """The PlacementError of a failed call, with the details the server sent in its trailers."""
    status = operation_pb2.Status(code=error.code().value[0], message=error.details() or "")
    for key, value in error.trailing_metadata() or ():
        if key == _DETAILS_KEY:
            parsed = operation_pb2.Status()
            try:
                parsed.ParseFromString(value)
                status = parsed
            except Exception:  # a malformed trailer is not worth hiding the real error for
                pass
    result = _error_from_status_proto(status)
    result.code = error.code()
    return result


@dataclasses.dataclass
class RetryPolicy:
    """Retries on UNAVAILABLE: `max_attempts` tries in all, backoff initial * multiplier^n capped at
    `max_backoff` (seconds), randomised by ±jitter, and at least the server's RetryInfo delay."""

    max_attempts: int = 5
    initial_backoff: float = 0.1
    multiplier: float = 2.0
    max_backoff: float = 5.0
    jitter: float = 0.2


class PlacementClient:
    """A connection to one placement server.

    `token`: sent as ``authorization: Bearer <token>`` on every call. `tls_ca`: a PEM file with the CA
    that signed the server's certificate; the channel is then TLS, otherwise plaintext. `timeout`: the
    default deadline of a call in seconds.
    """

    def __init__(
        self,
        address: str,
        token: Optional[str] = None,
        tls_ca: Optional[Union[str, Path]] = None,
        timeout: float = 600.0,
        retry: Optional[RetryPolicy] = None,
        max_message_bytes: int = 256 << 20,
    ):
        options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
        ]
        if tls_ca is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=Path(tls_ca).read_bytes())
            self._channel = grpc.secure_channel(address, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        self._stub = placement_service_pb2_grpc.PlacementServiceStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self._sleep = time.sleep  # replaced by tests
        self._random = random.Random()

    # ---- lifetime ----
    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def wait_for_ready(self, timeout: float = 5.0):
        """Blocks until the channel is connected; PlacementError(UNAVAILABLE) after `timeout` s."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise PlacementError(grpc.StatusCode.UNAVAILABLE, f"cannot connect within {timeout} s")

    # ---- calls ----
    def place(self, request: RequestLike, algorithm: Optional[str] = None,
              timeout: Optional[float] = None, *, microbatches: Optional[int] = None,
              max_in_flight: Optional[int] = None, data_parallel: Optional[int] = None,
              previous_placement: Optional[Mapping[str, str]] = None,
              move_weight_ns_per_byte: Optional[float] = None,
              departed_devices: Optional[Sequence[str]] = None) -> PlacementResult:
        """Places the request and waits for the answer (unary Place). `microbatches`, `max_in_flight`
        and `data_parallel` set the request's training plan (api.md section 2.1; 0 for W or D = the
        solver chooses); None keeps the request's own. Re-placement: `previous_placement` ({op name:
        device name}, e.g. an earlier result's assignment(request)), `move_weight_ns_per_byte` (ns of
        step traded for one byte moved) and `departed_devices` (the devices of the previous placement that
        left: then a name in neither the cluster nor this list is an error, not a departure); the result's
        ops_moved and bytes_moved say what moved."""
        request = self._request(request, algorithm, microbatches, max_in_flight, data_parallel,
                                previous_placement, move_weight_ns_per_byte, departed_devices)
        response = self._call(self._stub.Place, request, timeout)
        return PlacementResult.from_proto(response.placement, _device_names(request))

    def submit(self, request: RequestLike, algorithm: Optional[str] = None,
               timeout: Optional[float] = None, *, microbatches: Optional[int] = None,
               max_in_flight: Optional[int] = None, data_parallel: Optional[int] = None,
               previous_placement: Optional[Mapping[str, str]] = None,
               move_weight_ns_per_byte: Optional[float] = None,
               departed_devices: Optional[Sequence[str]] = None) -> Operation:
        """Starts a long-running placement job; returns its Operation (use .name with wait/watch).
        The plan and re-placement arguments are place()'s."""
        request = self._request(request, algorithm, microbatches, max_in_flight, data_parallel,
                                previous_placement, move_weight_ns_per_byte, departed_devices)
        submit = placement_service_pb2.SubmitPlacementRequest(request=request)
        response = self._call(self._stub.SubmitPlacement, submit, timeout)
        return Operation.from_proto(response.operation, _device_names(request))

    def get_operation(self, name: str, timeout: Optional[float] = None) -> Operation:
        response = self._call(self._stub.GetOperation,
                              placement_service_pb2.GetOperationRequest(name=name), timeout)
        return Operation.from_proto(response.operation)

    def cancel(self, name: str, timeout: Optional[float] = None) -> Operation:
        response = self._call(self._stub.CancelOperation,
                              placement_service_pb2.CancelOperationRequest(name=name), timeout)
        return Operation.from_proto(response.operation)

    def wait(self, name: str, timeout: Optional[float] = None) -> PlacementResult:
        """Waits until the operation is done and returns its placement; raises its error if it failed
        and PlacementError(DEADLINE_EXCEEDED) if it is not done within `timeout` seconds."""
        deadline = time.monotonic() + (timeout if timeout is not None else self._timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PlacementError(grpc.StatusCode.DEADLINE_EXCEEDED, f"{name} is not done yet")
            # The server caps one WaitOperation call (--max_wait_timeout); ask for at most 60 s and
            # give the call a little longer than that to answer.
            wait_s = min(left, 60.0)
            request = placement_service_pb2.WaitOperationRequest(name=name)
            request.timeout.FromNanoseconds(int(wait_s * 1e9))
            response = self._call(self._stub.WaitOperation, request, min(left, wait_s + 5.0))
            operation = Operation.from_proto(response.operation)
            if operation.done:
                if operation.error is not None:
                    raise operation.error
                return operation.result

    def watch(self, name: str, timeout: Optional[float] = None) -> Iterator[Progress]:
        """Progress updates of the operation as the server streams them, ending with one with
        done=True (the result is then available from wait() or get_operation())."""
        stream = self._stub.WatchOperation(
            placement_service_pb2.WatchOperationRequest(name=name),
            timeout=timeout if timeout is not None else self._timeout,
            metadata=self._metadata)
        try:
            for response in stream:
                operation = Operation.from_proto(response.operation)
                yield operation.progress
                if operation.done:
                    return
        except grpc.RpcError as error:
            raise _error_from_rpc(error) from None
        finally:
            stream.cancel()

    def evaluate(self, request: RequestLike, device: Sequence[int],
                 timeout: Optional[float] = None, *, microbatches: Optional[int] = None,
                 max_in_flight: Optional[int] = None,
                 data_parallel: Optional[int] = None) -> Tuple[PlacementResult, List[Tuple[str, str]]]:
        """Scores a given placement (device index per op, request order; of replica group 0 under a
        plan with data_parallel > 1): the result and the constraint violations as [(field,
        description)]. The plan arguments are place()'s."""
        request = self._request(request, None, microbatches, max_in_flight, data_parallel)
        evaluate = placement_service_pb2.EvaluateRequest(
            graph=request.graph, cluster=request.cluster, options=request.options, device=list(device))
        response = self._call(self._stub.Evaluate, evaluate, timeout)
        violations = [(v.field, v.description) for v in response.violations]
        return PlacementResult.from_proto(response.placement, _device_names(request)), violations

    def recommend_request(self, request: RequestLike, *, max_devices: int = 0, objective: str = "fastest",
                          within_percent: float = 0.0, include_placements: bool = False,
                          submit_only: bool = False, algorithm: Optional[str] = None,
                          microbatches: Optional[int] = None, max_in_flight: Optional[int] = None,
                          data_parallel: Optional[int] = None) -> "placement_service_pb2.RecommendRequest":
        """The RecommendRequest recommend() sends: the request's graph, its cluster as the pool, its
        options (with `algorithm` and the plan arguments applied; a fixed `data_parallel` keeps only the
        counts it divides, 1 = no replicas)."""
        if objective not in _OBJECTIVES:
            raise ValueError(f"objective {objective!r}: expected one of {sorted(_OBJECTIVES)}")
        request = self._request(request, algorithm, microbatches, max_in_flight, data_parallel)
        return placement_service_pb2.RecommendRequest(
            graph=request.graph, cluster=request.cluster, options=request.options, max_devices=max_devices,
            objective=_OBJECTIVES[objective], within_percent=within_percent,
            include_placements=include_placements, submit_only=submit_only)

    def recommend(self, request: Union[RequestLike, "placement_service_pb2.RecommendRequest"],
                  timeout: Optional[float] = None, **kwargs) -> Recommendation:
        """How many devices of the request's cluster (the pool) the job should get: every count
        1..max_devices with every data-parallel split placed (each an ordinary cached request), and the
        one `objective` recommends: "fastest", "fewest_within" (the fewest devices within
        `within_percent` % of the fastest) or "best_per_device". Keyword arguments are
        recommend_request()'s; a RecommendRequest is sent as it is."""
        if not isinstance(request, placement_service_pb2.RecommendRequest):
            request = self.recommend_request(request, **kwargs)
        response = self._call(self._stub.Recommend, request, timeout)
        rows = []
        for row in response.candidates:
            rows.append(Candidate(
                devices=row.devices, data_parallel=row.data_parallel, microbatches=row.microbatches,
                max_in_flight=row.max_in_flight, step_ns=row.step_ns,
                microbatches_per_second=row.microbatches_per_second, speedup=row.speedup,
                efficiency=row.efficiency, feasible=row.feasible, device_names=list(row.device_names),
                request_digest=row.request_digest,
                cache=placement_pb2.CacheResult.Name(row.cache) if row.cache else "", winner=row.winner,
                operation=row.operation,
                error=_error_from_status_proto(row.error) if row.HasField("error") else None,
                placement=(PlacementResult.from_proto(row.placement, list(row.device_names))
                           if row.HasField("placement") else None),
                time_limit_ns=row.time_limit_ns, time_limited=row.time_limited))
        return Recommendation(candidates=rows,
                              recommended=response.recommended if response.recommended >= 0 else None,
                              reason=response.reason, elapsed_ns=response.elapsed_ns,
                              cache_hits=response.cache_hits, proto=response, refined=response.refined)

    def list_algorithms(self, timeout: Optional[float] = None) -> List[AlgorithmInfo]:
        response = self._call(self._stub.ListAlgorithms, placement_service_pb2.ListAlgorithmsRequest(),
                              timeout)
        return [AlgorithmInfo(a.name, a.description, a.version) for a in response.algorithms]

    def health(self, service: str = "", timeout: float = 5.0) -> str:
        """grpc.health.v1 Check: "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN" or "UNKNOWN".

        The two health messages are a string and an enum, so they are encoded here by hand rather than
        generating stubs whose package (grpc.health.v1) would clash with grpcio's own `grpc` package.
        """
        encoded = service.encode("utf-8")
        request = (b"\x0a" + _varint(len(encoded)) + encoded) if encoded else b""
        check = self._channel.unary_unary(_HEALTH_CHECK)
        try:
            response = check(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as error:
            raise _error_from_rpc(error) from None
        status = 0
        if len(response) >= 2 and response[0] == 0x08:
            status = response[1]
        return _HEALTH_STATUS.get(status, "UNKNOWN")

    # ---- internals ----
    def _request(self, request: RequestLike, algorithm: Optional[str], microbatches: Optional[int] = None,
                 max_in_flight: Optional[int] = None, data_parallel: Optional[int] = None,
                 previous_placement: Optional[Mapping[str, str]] = None,
                 move_weight_ns_per_byte: Optional[float] = None,
                 departed_devices: Optional[Sequence[str]] = None) -> placement_pb2.PlaceRequest:
        """The request to send: read from a file, with the caller's algorithm, plan and previous
        placement (on a copy: the caller's message is left as it was)."""
        if isinstance(request, (str, Path)):
            request = load_request(request)
        changes = {"algorithm": algorithm or None, "microbatches": microbatches, "max_in_flight": max_in_flight,
                   "data_parallel": data_parallel, "move_weight_ns_per_byte": move_weight_ns_per_byte}
        if (any(value is not None for value in changes.values()) or previous_placement is not None
                or departed_devices is not None):
            copy = placement_pb2.PlaceRequest()
            copy.CopyFrom(request)
            for name, value in changes.items():
                if value is not None:
                    setattr(copy.options, name, value)
            if previous_placement is not None:
                copy.options.previous_placement.clear()
                copy.options.previous_placement.update(previous_placement)
            if departed_devices is not None:
                del copy.options.departed_devices[:]
                copy.options.departed_devices.extend(departed_devices)
            request = copy
        return request

    def _call(self, method, request, timeout: Optional[float]):
        """One unary call with retries on UNAVAILABLE, all within one deadline."""
        deadline = time.monotonic() + (timeout if timeout is not None else self._timeout)
        policy = self._retry
        attempt = 0
        while True:
            attempt += 1
            left = deadline - time.monotonic()
            if left <= 0:
                raise PlacementError(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline passed before the call")
            try:
                return method(request, timeout=left, metadata=self._metadata)
            except grpc.RpcError as rpc_error:
                error = _error_from_rpc(rpc_error)
            if error.code != grpc.StatusCode.UNAVAILABLE or attempt >= policy.max_attempts:
                raise error
            delay = min(policy.max_backoff, policy.initial_backoff * policy.multiplier ** (attempt - 1))
            if policy.jitter > 0:
                delay *= self._random.uniform(1 - policy.jitter, 1 + policy.jitter)
            if error.retry_delay is not None:
                delay = max(delay, error.retry_delay)
            if time.monotonic() + delay >= deadline:
                raise error  # no time left for another try
            self._sleep(delay)


def _device_names(request: placement_pb2.PlaceRequest) -> List[str]:
    return [d.name for d in request.cluster.devices]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
