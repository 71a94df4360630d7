"""The fake Triton's answer on NVIDIA's ``llmapi`` ``tensorrt_llm`` contract.

As NVIDIA's model (TensorRT-LLM triton_backend/all_models/llmapi/tensorrt_llm/1/model.py
@044a90d209e380c95e23e8ae42f3583fa05ada78, helpers.py @0df60f9ad779c4dc4f55da07e08b969fc4684e56)
answers: no batch dimension (``max_batch_size: 0``); ``streaming`` needs a decoupled model
(``Streaming is only supported in decoupled mode.``); streamed, one response per token holding
the text so far (cumulative), the last one flagged final; unstreamed, one final response;
``finish_reason`` / ``stop_reason`` only when ``return_finish_reason`` / ``return_stop_reason``
are set (``str()`` of TensorRT-LLM's value: ``"None"`` until the end); the KV-cache counters
with ``sampling_param_return_perf_metrics``, as BYTES holding the number (model.py fills them
in ``text_output``'s dtype, whatever the config declares); ``exclude_input_from_output``
defaults to False, and then the prompt is echoed before the text. A ``max_tokens`` the request
leaves out is the LLM API's default, 32.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import numpy as np
from tritonclient.grpc import service_pb2

from tests.fakes.triton_requests import ReceivedRequest, TritonRejected
from tests.fakes.triton_wire import infer_response

LLM_API_DEFAULT_MAX_TOKENS = 32


def _strings(*values: str) -> np.ndarray:
    return np.array([v.encode("utf-8") for v in values], dtype=np.object_)


async def llmapi_answer(
    request: ReceivedRequest,
    config: dict[str, Any],
    tokens: Sequence[str],
    reused_blocks: int,
    paced: Callable[[Sequence[Any]], AsyncIterator[Any]],
) -> AsyncIterator[service_pb2.ModelInferResponse]:
    """The responses to one request; ``paced`` applies the fake's script (delays, hangs)."""
    streaming = bool(request.scalar("streaming"))
    if streaming and not config.get("model_transaction_policy", {}).get("decoupled"):
        raise TritonRejected(
            "Error generating request: Streaming is only supported in decoupled mode."
        )
    limit = request.scalar("sampling_param_max_tokens") or LLM_API_DEFAULT_MAX_TOKENS
    kept = list(tokens[: int(limit)])
    finish = "length" if len(tokens) > len(kept) else "stop"
    echo = "" if request.scalar("sampling_param_exclude_input_from_output") else _prompt(request)
    ids = {"model": request.model, "request_id": request.request_id}
    text = ""
    async for index, token in _enumerated(paced(kept)):
        text += token
        last = index == len(kept) - 1
        if streaming:
            outputs = _outputs(request, echo + text, finish if last else None, reused_blocks)
            yield infer_response(final=last, **ids, **outputs)
    if not streaming or not kept:
        outputs = _outputs(request, echo + text, finish, reused_blocks)
        yield infer_response(final=True, **ids, **outputs)


async def _enumerated(items: AsyncIterator[Any]) -> AsyncIterator[tuple[int, Any]]:
    index = 0
    async for item in items:
        yield index, item
        index += 1


def _prompt(request: ReceivedRequest) -> str:
    value = request.inputs["text_input"].reshape(-1)[0]
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _outputs(
    request: ReceivedRequest, text: str, finish: str | None, reused: int
) -> dict[str, np.ndarray]:
    outputs = {"text_output": _strings(text)}
    if request.scalar("return_finish_reason"):
        outputs["finish_reason"] = _strings(str(finish))
    if request.scalar("return_stop_reason"):
        outputs["stop_reason"] = _strings("None")
    if request.scalar("sampling_param_return_perf_metrics"):
        # model.py writes it in text_output's dtype, str() of the count (docs/triton-contract.md)
        outputs["kv_cache_reused_block"] = _strings(str(reused))
    return outputs
