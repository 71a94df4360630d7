"""The only room that speaks gRPC (client, contract, tensors, embedded launcher).

Importing this package first picks gRPC's classic client transport for the process:
grpcio 1.6x+ routes client calls through its EventEngine, whose thread pool hands every
streamed message across several threads; with ``-event_engine_client`` the poller thread
reads the socket itself. ``python -m bench hotpath --triton`` measured the receive cost of
one streamed Triton response at about 22-26 us of CPU instead of 31-68 us (the gateway's
largest per-token cost). grpc reads ``GRPC_EXPERIMENTS`` once, when it is imported, so this
runs before any ``import grpc`` here, and only if grpc is not loaded yet and the operator
has not set ``GRPC_EXPERIMENTS`` (set it, even empty, to keep grpc's default). The variable
is removed again at once, so processes started later (the embedded tritonserver) never see
it.
"""

from __future__ import annotations

import os
import sys

GRPC_CLIENT_EXPERIMENTS = "-event_engine_client"


def _import_grpc_with_classic_client() -> None:
    if "grpc" in sys.modules or "GRPC_EXPERIMENTS" in os.environ:
        return
    os.environ["GRPC_EXPERIMENTS"] = GRPC_CLIENT_EXPERIMENTS
    try:
        import grpc  # noqa: F401  (imported for its side effect: reading the variable)
    finally:
        del os.environ["GRPC_EXPERIMENTS"]


_import_grpc_with_classic_client()
