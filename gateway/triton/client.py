"""The only room that speaks gRPC: one reused client per Triton, one stream per request.

Each request opens one bidirectional ``ModelStreamInfer`` stream, sends its single request,
half-closes, and reads responses until Triton ends the stream (the asyncio client cannot
ask for Triton's empty final response, so the stream's normal end marks completion).
Leaving the iterator early (the HTTP client went away, a stop string matched) cancels the
gRPC call, which cancels the request inside Triton. Foreign errors are translated here, once.

Streams go through grpc.aio's multi-callable on a channel of our own, not tritonclient's
``stream_infer``: that wraps every response in two more async iterators and an
``InferResult``, and feeds its one request through an async generator that grpc consumes in
an extra task per request; and a bidirectional call costs three round trips through grpc's
completion queue to send one message and half-close. The request itself is still built by
tritonclient, and the unary calls (health, model config) still use its client.

With ``upstream.stream_client = "h2"`` the token streams go over grpclib instead, read on the
event loop without grpc's poller thread (``h2streams.py``); the rest stays on grpc.aio. With
``"auto"`` a stream goes over grpclib unless its request carries a large tensor (an image's
pixels, audio features: grpclib frames what it sends in Python, grpcio in C), so token-heavy
text traffic gets grpclib's cheaper receive and media requests keep grpcio's cheaper send.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any

import grpc
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2
from tritonclient.grpc._utils import _get_inference_request
from tritonclient.utils import InferenceServerException

from gateway.errors import GatewayError, InvalidRequest, UpstreamFailed, UpstreamUnavailable
from gateway.observability.tracing import phase
from gateway.triton.backend import Route
from gateway.triton.contract import ModelContract, parse_model_config
from gateway.triton.outputs import is_final

if TYPE_CHECKING:
    from gateway.triton.h2streams import H2Streams

# Triton reports model-side validation failures only as text; these mark the caller's fault.
_CLIENT_FAULT = re.compile(
    r"exceed|too (long|many|large)|invalid|must be|out of range|not supported|unsupported",
    re.IGNORECASE,
)
# Triton's words for a server or model that cannot serve yet (loading, unloading, restarting):
# a retryable 503, not the model's failure.
_NOT_READY = ("unavailable", "not ready", "not at ready state", "is not found or not ready")
_UNAVAILABLE = "the inference server is unavailable; retry shortly"
_STREAM_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"
# "auto": a request whose tensors hold more bytes than this goes over grpcio. A 336 px
# LLaVA image is 677 kB of fp16; a text request's inputs are well under 1 kB.
H2_MAX_REQUEST_BYTES = 64 * 1024
# As tritonclient's channel: messages up to 2 GiB (images and features travel inline).
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 2**31 - 1),
    ("grpc.max_receive_message_length", 2**31 - 1),
]


def translate_error(exc: BaseException) -> GatewayError:
    """A tritonclient or gRPC error -> the gateway's error tree."""
    if isinstance(exc, grpc.aio.AioRpcError):
        code = exc.code()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return UpstreamUnavailable(_UNAVAILABLE)
        message = exc.details() or str(code)
    else:
        message = exc.message() if isinstance(exc, InferenceServerException) else str(exc)
        status = exc.status() if isinstance(exc, InferenceServerException) else None
        if status and "UNAVAILABLE" in str(status):
            return UpstreamUnavailable(_UNAVAILABLE)
    return failure_of(message)


def failure_of(message: str | None) -> GatewayError:
    """What Triton's error text says: not ready yet, the caller's fault, or a failure."""
    message = (message or "inference failed").strip()
    lowered = message.lower()
    if any(marker in lowered for marker in _NOT_READY):
        return UpstreamUnavailable(f"the inference server is not ready: {message}")
    if _CLIENT_FAULT.search(message):
        return InvalidRequest(f"the model rejected the request: {message}", code="model_rejected")
    return UpstreamFailed(f"the inference server failed: {message}")


class TritonClient:
    """One gRPC channel to one Triton, shared by every request to it. ``stream_client``
    "h2" reads the token streams with grpclib on the event loop (``h2streams.py``); "auto"
    does so for requests without a large tensor."""

    def __init__(self, url: str, keepalive_s: float = 0.0, stream_client: str = "grpcio") -> None:
        self.url = url
        self._h2: H2Streams | None = None
        # The largest request (tensor bytes) sent over grpclib; larger ones go over grpcio.
        self._h2_max_bytes = H2_MAX_REQUEST_BYTES if stream_client == "auto" else None
        if stream_client in ("h2", "auto"):  # grpclib is imported only where it is used
            from gateway.triton.h2streams import H2Streams

            self._h2 = H2Streams(url, keepalive_s)
        self._client = grpcclient.InferenceServerClient(url)
        options = list(_CHANNEL_OPTIONS)
        if keepalive_s > 0:  # a ping every keepalive_s; unanswered as long again: reconnect
            milliseconds = int(keepalive_s * 1000)
            options += [
                ("grpc.keepalive_time_ms", milliseconds),
                ("grpc.keepalive_timeout_ms", milliseconds),
                ("grpc.http2.max_pings_without_data", 0),
            ]
        self._channel = grpc.aio.insecure_channel(url, options=options)
        # Triton's ModelStreamInfer is bidirectional, but a request here is one message then
        # a half-close: called as unary-stream, grpc sends metadata, message and close in
        # one batch instead of three round trips through its completion queue. On the wire
        # it is the same HTTP/2 stream.
        self._stream_infer = self._channel.unary_stream(
            _STREAM_METHOD,
            request_serializer=service_pb2.ModelInferRequest.SerializeToString,
            response_deserializer=service_pb2.ModelStreamInferResponse.FromString,
        )

    async def close(self) -> None:
        if self._h2 is not None:
            self._h2.close()
        await self._channel.close()
        await self._client.close()

    async def is_ready(self, model_names: Sequence[str] = ()) -> bool:
        try:
            if not await self._client.is_server_ready(client_timeout=2.0):
                return False
            for name in model_names:
                if not await self._client.is_model_ready(name, client_timeout=2.0):
                    return False
        except (InferenceServerException, grpc.RpcError):
            return False
        return True

    async def contract(self, model_name: str) -> ModelContract:
        try:
            config: dict[str, Any] = await self._client.get_model_config(
                model_name, as_json=True, client_timeout=10.0
            )
        except (InferenceServerException, grpc.RpcError) as exc:
            raise UpstreamUnavailable(
                f"cannot read the config of Triton model {model_name!r} at {self.url}: {exc}"
            ) from exc
        return parse_model_config(config.get("config", config))

    def stream(
        self,
        model_name: str,
        inputs: Sequence[grpcclient.InferInput],
        request_id: str,
        outputs: Sequence[str] = (),
        route: Route | None = None,
    ) -> AsyncGenerator[service_pb2.ModelInferResponse, None]:
        """The raw responses of one request until its final one; cancels the call if left
        early. ``outputs`` names the outputs to ask for (default: all the model declares);
        ``route`` is for replica sets (one server has nowhere else to send it)."""
        if self._h2 is not None and self._takes_h2(inputs):
            return self._h2_stream(self._h2, model_name, inputs, request_id, outputs)
        return self._grpcio_stream(model_name, inputs, request_id, outputs)

    def _takes_h2(self, inputs: Sequence[grpcclient.InferInput]) -> bool:
        limit = self._h2_max_bytes
        if limit is None:
            return True
        size = 0
        for tensor in inputs:
            size += len(getattr(tensor, "_raw_content", None) or b"")
            if size > limit:
                return False
        return True

    async def _grpcio_stream(
        self,
        model_name: str,
        inputs: Sequence[grpcclient.InferInput],
        request_id: str,
        outputs: Sequence[str],
    ) -> AsyncGenerator[service_pb2.ModelInferResponse, None]:
        sending = time.perf_counter()
        request = request_message(model_name, inputs, request_id, outputs)
        call = self._stream_infer(request)
        phase("triton.send", sending, request_id=request_id, model=model_name)
        finished = False
        try:
            while True:
                response = await call.read()
                if response is grpc.aio.EOF:
                    # Having half-closed its side, the client sees the stream end normally
                    # once Triton has sent the request's last response.
                    break
                if response.error_message:
                    raise translate_error(InferenceServerException(response.error_message))
                yield response.infer_response
                if is_final(response.infer_response):
                    break
            finished = True
        except grpc.RpcError as exc:
            raise translate_error(exc) from exc
        finally:
            if not finished:
                call.cancel()

    @staticmethod
    async def _h2_stream(
        h2: H2Streams,
        model_name: str,
        inputs: Sequence[grpcclient.InferInput],
        request_id: str,
        outputs: Sequence[str],
    ) -> AsyncGenerator[service_pb2.ModelInferResponse, None]:
        """As ``_grpcio_stream``, over grpclib: the call is reset if left before its end."""
        sending = time.perf_counter()
        responses = h2.responses(request_message(model_name, inputs, request_id, outputs))
        phase("triton.send", sending, request_id=request_id, model=model_name)
        try:
            async for response in responses:  # it ends after the final response
                if response.error_message:
                    raise translate_error(InferenceServerException(response.error_message))
                yield response.infer_response
        except h2.errors as exc:
            unavailable, message = h2.describe(exc)
            if unavailable:
                raise UpstreamUnavailable(_UNAVAILABLE) from exc
            raise failure_of(message) from exc
        finally:
            await responses.aclose()


def request_message(
    model_name: str,
    inputs: Sequence[grpcclient.InferInput],
    request_id: str,
    outputs: Sequence[str],
) -> service_pb2.ModelInferRequest:
    """The one message of a stream, built by tritonclient (its errors translated)."""
    try:
        return _get_inference_request(
            model_name=model_name,
            inputs=list(inputs),
            model_version="",
            request_id=request_id,
            outputs=[grpcclient.InferRequestedOutput(name) for name in outputs] or None,
            sequence_id=0,
            sequence_start=False,
            sequence_end=False,
            priority=0,
            timeout=None,
            parameters=None,
        )
    except InferenceServerException as exc:
        raise translate_error(exc) from exc
