"""The only room that speaks gRPC: one reused client per Triton, one stream per request.

Each request opens one bidirectional ``ModelStreamInfer`` stream, sends its single request,
half-closes, and reads responses until Triton ends the stream (the asyncio client cannot
ask for Triton's empty final response, so the stream's normal end marks completion).
Leaving the iterator early (the HTTP client went away, a stop string matched) cancels the
gRPC call, which cancels the request inside Triton. Foreign errors are translated here, once.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import numpy as np
import tritonclient.grpc.aio as grpcclient
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


def is_final(result: grpcclient.InferResult) -> bool:
    """Whether Triton flagged this response as the request's last."""
    final_param = result.get_response().parameters.get("triton_final_response")
    return bool(final_param.bool_param) if final_param is not None else False


def _response(result: grpcclient.InferResult) -> TritonResponse:
    """Read one response straight from its protobuf: called once per token.

    ``InferResult.as_numpy`` scans every output and builds numpy arrays (an object array
    for BYTES) for each name asked; here one pass over the outputs decodes the first
    length-prefixed string of ``text_output`` and the counters from Triton's raw contents.
    An output sent another way (typed ``contents``, unusual in Triton's answers) falls back
    to ``as_numpy``.
    """
    raw = result.get_response()
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
            text = _first_string(contents[index]) if index < len(contents) else _text_of(result)
        elif name in _COUNTERS:
            value = _first_int(contents[index], output.datatype) if index < len(contents) else None
            if value is None:
                value = _int_of(result, name)
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


def _text_of(result: grpcclient.InferResult) -> str:
    array = result.as_numpy("text_output")
    if array is None or not array.size:
        return ""
    value = array.reshape(-1)[0]
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _int_of(result: grpcclient.InferResult, name: str) -> int | None:
    array = result.as_numpy(name)
    return int(np.asarray(array).reshape(-1)[0]) if array is not None and array.size else None


class TritonClient:
    """One gRPC channel to one Triton, shared by every request to it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._client = grpcclient.InferenceServerClient(url)

    async def close(self) -> None:
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
        results = self.stream_results(model_name, inputs, request_id)
        try:
            async for result in results:
                yield _response(result)
        finally:
            await results.aclose()

    async def stream_results(
        self,
        model_name: str,
        inputs: list[grpcclient.InferInput],
        request_id: str,
        outputs: Sequence[str] = (),
    ) -> AsyncIterator[grpcclient.InferResult]:
        """Raw results for one request until the final one; cancels the call if left early.

        ``outputs`` names the outputs to ask for (default: all the model declares); for
        callers whose model does not answer with ``text_output`` (Whisper's contracts).
        """
        request: dict[str, Any] = {
            "model_name": model_name,
            "inputs": inputs,
            "request_id": request_id,
        }
        if outputs:
            request["outputs"] = [grpcclient.InferRequestedOutput(name) for name in outputs]

        async def one_request() -> AsyncIterator[dict[str, Any]]:
            yield request

        try:
            call = self._client.stream_infer(one_request())
        except (InferenceServerException, grpc.RpcError) as exc:
            raise translate_error(exc) from exc
        finished = False
        try:
            async for result, error in call:
                if error is not None:
                    raise translate_error(error)
                yield result
                if is_final(result):
                    break
            # Having half-closed its side, the client sees the stream end normally once
            # Triton has sent the request's last response; failures arrive as errors.
            finished = True
        except grpc.RpcError as exc:
            raise translate_error(exc) from exc
        finally:
            if not finished:
                call.cancel()
