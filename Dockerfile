# Multi-stage image for placement_server (+ placementctl for health checks, placement_offline for files).
# Build stage: Debian 12 with the -dev packages; runtime stage: bookworm-slim with the matching runtime
# libraries only, running as a fixed non-root user.
#   docker build -t placement-server .        (deploy/README.md: compose stack and Kubernetes)
#   podman build --format docker -t placement-server .   (OCI format drops HEALTHCHECK)
FROM debian:bookworm AS build
COPY deploy/debian-packages.txt /tmp/debian-packages.txt
# Build packages only: the list up to its "test-only" marker.
RUN apt-get update \
 && sed '/^# test-only/,$d' /tmp/debian-packages.txt | grep -v '^\s*#' | sed '/^\s*$/d' \
    | xargs apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DPLACEMENT_BUILD_TESTS=OFF -DPLACEMENT_BUILD_BENCHMARKS=OFF \
 && cmake --build /build --target placement_server placementctl placement_offline \
 && install -m 0755 /build/service/server/placement_server /build/client/placementctl \
      /build/service/offline/placement_offline /usr/local/bin/

# Runtime libraries: the packages `ldd` of the three binaries resolves to (their own dependencies come
# along); tests/deploy/runtime_packages_test.py checks this list against the binaries of every build.
FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcivetweb1 libc-ares2 libre2-9 \
      libmetis5 libonnx1 zlib1g libssl3 libhiredis0.14 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 placement \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin placement
COPY --from=build /usr/local/bin/placement_server /usr/local/bin/placementctl \
     /usr/local/bin/placement_offline /usr/local/bin/
LABEL org.opencontainers.image.title="placement-server" \
      org.opencontainers.image.description="Places DNN training-step graphs on devices (gRPC)"
USER 10001:10001
EXPOSE 50051 9464
STOPSIGNAL SIGTERM
# placementctl waits --connect_timeout (5 s by default) for a connection before the health call's own
# --timeout starts: both must fit in the HEALTHCHECK's --timeout, or a hung server is killed by the
# runtime's timeout instead of reported by the probe (tests/deploy/runtime_packages_test.py checks it).
# Podman keeps HEALTHCHECK only in Docker-format images: `podman build --format docker`.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s \
  CMD ["/usr/local/bin/placementctl", "--server=127.0.0.1:50051", "--connect_timeout=1s", \
       "--timeout=1s", "health"]
ENTRYPOINT ["/usr/local/bin/placement_server"]
# Plaintext unless overridden: the server refuses to start without TLS files or an explicit
# --insecure. In production replace these arguments with --tls_cert/--tls_key (+ --tls_client_ca,
# --auth_tokens) from mounted secrets.
# --shutdown_grace=8s: `docker stop` / `podman stop` send SIGKILL after 10 s; the grace (plus 0.5 s in
# which the server answers the calls still waiting UNAVAILABLE) must end before that, or a stop with a
# call in flight ends in SIGKILL (exit 137). With a longer grace, stop with `--time`/`--stop-timeout`
# (compose: stop_grace_period; Kubernetes: terminationGracePeriodSeconds) above grace + drain delay.
CMD ["--port=50051", "--metrics_port=9464", "--insecure", "--shutdown_grace=8s"]
