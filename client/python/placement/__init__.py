"""Python client of the placement service (placement.v1) and the PyTorch exporter.

Installed (``pip install ./client/python``), the package carries the ``placement.v1`` stubs, generated
when it was built, and ``__version__``, the server's version. From a source checkout the stubs live in
the *build tree* instead (CMake target ``placement_python_stubs`` writes
``<build>/client/python/generated/placement/v1/*_pb2*.py``): put that folder on ``PYTHONPATH`` next to
this package's folder. This package and the stubs then share the top-level name ``placement``, so its
``__path__`` is extended over every ``placement`` folder on ``sys.path``.

    from placement.client import PlacementClient
    with PlacementClient("localhost:50051") as client:
        result = client.place("request.json")
"""
import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)

try:
    from placement._version import __version__  # written by the build backend
except ImportError:  # a source checkout on PYTHONPATH
    __version__ = "0+source"


def __getattr__(name):
    # Lazy, so that `python3 -m placement.torch_export` does not need grpc.
    if name in ("PlacementClient", "PlacementError", "PlacementResult", "TrainingPlan", "Progress", "Operation"):
        from placement import client

        return getattr(client, name)
    raise AttributeError(name)
