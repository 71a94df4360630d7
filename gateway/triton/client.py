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
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2
from tritonclient.grpc._utils import _get_inference_request
from tritonclient.utils import InferenceServerException

from gateway.errors import GatewayError, InvalidRequest, UpstreamFailed, UpstreamUnavailable
from gateway.triton.contract import REQUIRED_INPUTS, ModelContract, parse_model_config

# Triton reports model-side validation failures only as text; these mark the caller's fault.
_CLIENT_FAULT = re.compile(
    r"exceed|too (long|many|large)|invalid|must be|out of range|not supported|unsupported",
    re.IGNORECASE,
)
_COUNTERS = frozenset({"num_input_tokens", "num_output_tokens", "kv_cache_reused_blocks"})
_INT_WIDTHS = {"INT32": 4, "INT64": 8, "UINT32": 4, "UINT64": 8, "INT16": 2, "INT8": 1}
_STREAM_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"
# As tritonclient's channel: messages up to 2 GiB (images and features travel inline).
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 2**31 - 1),
    ("grpc.max_receive_message_length", 2**31 - 1),
]


@dataclass(frozen=True)
class TritonResponse:
    """One streamed response: its text and whichever counters the model returned."""

    text: str
    final: bool
    has_output: bool
    counters: dict[str, int]


def translate_error(exc: BaseException) -> GatewayError:
    """A tritonclient or gRPC error -> the gateway's error tree."""
    if isinstance(exc, grpc.aio.AioRpcError):
        code = exc.code()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return UpstreamUnavailable("the inference server is unavailable; retry shortly")
        message = exc.details() or str(code)
    else:
        message = exc.message() if isinstance(exc, InferenceServerException) else str(exc)
        status = exc.status() if isinstance(exc, InferenceServerException) else None
        if status and "UNAVAILABLE" in str(status):
            return UpstreamUnavailable("the inference server is unavailable; retry shortly")
    message = (message or "inference failed").strip()
    if "unavailable" in message.lower() or "not ready" in message.lower():
        return UpstreamUnavailable(f"the inference server is not ready: {message}")
    if _CLIENT_FAULT.search(message):
        return InvalidRequest(f"the model rejected the request: {message}", code="model_rejected")
    return UpstreamFailed(f"the inference server failed: {message}")


def is_final(raw: service_pb2.ModelInferResponse) -> bool:
    """Whether Triton flagged this response as the request's last."""
    final_param = raw.parameters.get("triton_final_response")
    return bool(final_param.bool_param) if final_param is not None else False


def _response(raw: service_pb2.ModelInferResponse) -> TritonResponse:
    """Read one response straight from its protobuf: called once per token.

    ``InferResult.as_numpy`` scans every output and builds numpy arrays (an object array
    for BYTES) for each name asked; here one pass over the outputs decodes the first
    length-prefixed string of ``text_output`` and the counters from Triton's raw contents.
    An output sent another way (typed ``contents``, unusual in Triton's answers) falls back
    to ``as_numpy``.
    """
    final_param = raw.parameters.get("triton_final_response")
    final = bool(final_param.bool_param) if final_param is not None else False
    contents = raw.raw_output_contents
    text = ""
    has_output = False
    counters: dict[str, int] = {}
    for index, output in enumerate(raw.outputs):
        name = output.name
        if name == "text_output":
            has_output = True
            text = _first_string(contents[index]) if index < len(contents) else _text_of(raw)
        elif name in _COUNTERS:
            value = _first_int(contents[index], output.datatype) if index < len(contents) else None
            if value is None:
                value = _int_of(raw, name)
            if value is not None:
                counters[name] = value
    return TritonResponse(text=text, final=final, has_output=has_output, counters=counters)


def _first_string(data: bytes) -> str:
    """The first element of a serialised BYTES tensor (4-byte little-endian length, bytes)."""
    if len(data) < 4:
        return ""
    size = int.from_bytes(data[:4], "little")
    return data[4 : 4 + size].decode("utf-8", errors="replace")


def _first_int(data: bytes, datatype: str) -> int | None:
    width = _INT_WIDTHS.get(datatype)
    if width is None or len(data) < width:
        return None
    return int.from_bytes(data[:width], "little", signed=not datatype.startswith("U"))


def _text_of(raw: service_pb2.ModelInferResponse) -> str:
    array = grpcclient.InferResult(raw).as_numpy("text_output")
    if array is None or not array.size:
        return ""
    value = array.reshape(-1)[0]
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _int_of(raw: service_pb2.ModelInferResponse, name: str) -> int | None:
    array = grpcclient.InferResult(raw).as_numpy(name)
    return int(np.asarray(array).reshape(-1)[0]) if array is not None and array.size else None


class TritonClient:
    """One gRPC channel to one Triton, shared by every request to it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client = grpcclient.InferenceServerClient(url)
        self._channel = grpc.aio.insecure_channel(url, options=_CHANNEL_OPTIONS)
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

    async def contract(
        self, model_name: str, required: Sequence[str] = REQUIRED_INPUTS
    ) -> ModelContract:
        try:
            config: dict[str, Any] = await self._client.get_model_config(
                model_name, as_json=True, client_timeout=10.0
            )
        except (InferenceServerException, grpc.RpcError) as exc:
            raise UpstreamUnavailable(
                f"cannot read the config of Triton model {model_name!r} at {self.url}: {exc}"
            ) from exc
        return parse_model_config(config.get("config", config), required)

    async def stream(
        self, model_name: str, inputs: list[grpcclient.InferInput], request_id: str
    ) -> AsyncIterator[TritonResponse]:
        """Responses for one request until the final one; cancels the call if left early."""
        responses = self._responses(model_name, inputs, request_id, ())
        try:
            async for raw in responses:
                yield _response(raw)
        finally:
            await responses.aclose()

    async def stream_results(
        self,
        model_name: str,
        inputs: list[grpcclient.InferInput],
        request_id: str,
        outputs: Sequence[str] = (),
    ) -> AsyncIterator[grpcclient.InferResult]:
        """Results for one request until the final one, as tritonclient's ``InferResult``.

        ``outputs`` names the outputs to ask for (default: all the model declares); for
        callers whose model does not answer with ``text_output`` (Whisper's contracts).
        """
        responses = self._responses(model_name, inputs, request_id, outputs)
        try:
            async for raw in responses:
                yield grpcclient.InferResult(raw)
        finally:
            await responses.aclose()

    async def _responses(
        self,
        model_name: str,
        inputs: list[grpcclient.InferInput],
        request_id: str,
        outputs: Sequence[str],
    ) -> AsyncIterator[service_pb2.ModelInferResponse]:
        """The raw responses of one request's stream; cancels the call if left early."""
        try:
            request = _get_inference_request(
                model_name=model_name,
                inputs=inputs,
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
        call = self._stream_infer(request)
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
