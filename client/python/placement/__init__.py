"""Python client of the placement service (placement.v1) and the PyTorch exporter.

The generated protobuf/gRPC stubs live in the *build tree* (CMake target ``placement_python_stubs``
writes ``<build>/client/python/generated/placement/v1/*_pb2*.py``); put that folder on ``PYTHONPATH``
next to this package's folder. This package and the stubs share the top-level name ``placement``, so its
``__path__`` is extended over every ``placement`` folder on ``sys.path``.

    from placement.client import PlacementClient
    with PlacementClient("localhost:50051") as client:
        result = client.place("request.json")
"""
import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)


def __getattr__(name):
    # Lazy, so that `python3 -m placement.torch_export` does not need grpc.
    if name in ("PlacementClient", "PlacementError", "PlacementResult", "Progress", "Operation"):
        from placement import client

        return getattr(client, name)
    raise AttributeError(name)
