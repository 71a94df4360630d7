"""What the gateway needs from one Triton server, as a ``Protocol``: the seam between the
request pipeline and gRPC.

``TritonClient`` is the real implementation (one grpc.aio channel). Tests put an in-process
fake of the TensorRT-LLM contract behind the same four calls, so routes, SSE framing and
cancellation are checked without ``tritonserver``. The contract every implementation keeps:

- ``contract`` reads a model's config (inputs, outputs, decoupled policy); a server that cannot
  be reached raises ``UpstreamUnavailable``.
- ``stream`` sends one request and yields its ``ModelInferResponse`` messages until Triton flags
  the final one (or ends the stream); an error response or a failed call raises the gateway
  error it maps to (``translate_error``). Closing the iterator early cancels the request.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Protocol

import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2

from gateway.triton.contract import ModelContract


@dataclass
class Route:
    """One call's placement: its affinity ``key`` in (the content id that becomes
    ``prompt_table_extra_id``, or a hash of the prompt's first block; None: no affinity), and
    the ``replica`` that served it out (set by ``ReplicaSet``; None with one server)."""

    key: int | None = None
    replica: str | None = None


class TritonBackend(Protocol):
    """One Triton server, shared by every request to it."""

    url: str

    async def contract(self, model_name: str) -> ModelContract: ...

    async def is_ready(self, model_names: Sequence[str] = ()) -> bool: ...

    def stream(
        self,
        model_name: str,
        inputs: Sequence[grpcclient.InferInput],
        request_id: str,
        outputs: Sequence[str] = (),
        route: Route | None = None,
    ) -> AsyncGenerator[service_pb2.ModelInferResponse, None]: ...

    async def close(self) -> None: ...
