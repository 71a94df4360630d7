"""The co-launched ``tritonserver`` from the nvidia-pytriton wheel (Triton 2.51).

- ``install``: where the wheel put the server and the Python backend, and the environment
  its stub needs (``StubPython``, ``TritonInstall``, ``server_environment``);
- ``launcher``: ``EmbeddedTriton``, which starts it (retrying a server that dies before it is
  ready), watches it and restarts it;
- ``group``: ``EmbeddedReplicas``, several of them over one repository (replicas);
- ``cleanup``: what a dead server leaves (stuck stubs, ``/dev/shm`` regions) is removed.
"""

from __future__ import annotations

from gateway.triton.embedded.cleanup import Leftovers, reap
from gateway.triton.embedded.group import EmbeddedReplicas
from gateway.triton.embedded.install import (
    StubPython,
    TritonInstall,
    free_loopback_port,
    server_environment,
)
from gateway.triton.embedded.launcher import (
    DEFAULT_READY_TIMEOUT_S,
    DEFAULT_RESTART_BACKOFF_S,
    DEFAULT_START_ATTEMPTS,
    DEFAULT_START_BACKOFF_S,
    DEFAULT_STUB_TIMEOUT_S,
    DiedBeforeReady,
    EmbeddedTriton,
    default_load_threads,
)

__all__ = [
    "DEFAULT_READY_TIMEOUT_S",
    "DEFAULT_RESTART_BACKOFF_S",
    "DEFAULT_START_ATTEMPTS",
    "DEFAULT_START_BACKOFF_S",
    "DEFAULT_STUB_TIMEOUT_S",
    "DiedBeforeReady",
    "EmbeddedReplicas",
    "EmbeddedTriton",
    "Leftovers",
    "StubPython",
    "TritonInstall",
    "default_load_threads",
    "free_loopback_port",
    "reap",
    "server_environment",
]
