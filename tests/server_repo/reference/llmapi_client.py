"""Talking to an llmapi-contract model over Triton gRPC: tensors without a batch dimension.

NVIDIA's ``llmapi`` model runs with ``max_batch_size: 0`` (TensorRT-LLM
triton_backend/all_models/llmapi/tensorrt_llm/1/model.yaml), so every tensor is sent as the
config declares it: ``text_input`` ``[1]``, ``image_url`` ``[N]``, each scalar ``[1]``.
"""

from __future__ import annotations

import asyncio
import base64
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tritonclient.grpc.aio as grpcclient
from PIL import Image
from tritonclient.utils import np_to_triton_dtype

MODEL = "reference_qwen2_5_vl"

# The dtype each input is sent with, as NVIDIA's config.pbtxt declares it.
DTYPES: dict[str, Any] = {
    "text_input": np.object_,
    "image_url": np.object_,
    "streaming": np.bool_,
    "sampling_param_best_of": np.int32,
    "sampling_param_temperature": np.float32,
    "sampling_param_top_k": np.int32,
    "sampling_param_top_p": np.float32,
    "sampling_param_frequency_penalty": np.float32,
    "sampling_param_presence_penalty": np.float32,
    "sampling_param_max_tokens": np.int32,
    "sampling_param_stop": np.object_,
    "sampling_param_seed": np.uint64,
    "sampling_param_exclude_input_from_output": np.bool_,
    "sampling_param_return_perf_metrics": np.bool_,
    "return_finish_reason": np.bool_,
    "return_stop_reason": np.bool_,
    "return_cumulative_logprob": np.bool_,
    "stop": np.bool_,
}


def data_url(image: np.ndarray) -> str:
    """An RGB ``[H, W, 3]`` array as a PNG ``data:`` URI."""
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def inputs(**values: Any) -> list[grpcclient.InferInput]:
    """InferInputs: a list value is a ``[N]`` tensor, anything else ``[1]``."""
    made = []
    for name, value in values.items():
        items = value if isinstance(value, list) else [value]
        if DTYPES[name] is np.object_:
            items = [v.encode() if isinstance(v, str) else v for v in items]
        array = np.array(items, dtype=DTYPES[name])
        tensor = grpcclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        made.append(tensor)
    return made


@dataclass
class Answer:
    """The responses of one request, decoded; ``error`` is the error message if one came."""

    results: list[grpcclient.InferResult] = field(default_factory=list)
    error: str | None = None

    def strings(self, name: str) -> list[str]:
        return [r.as_numpy(name)[0].decode() for r in self.results]

    @property
    def texts(self) -> list[str]:
        return self.strings("text_output")

    def number(self, name: str) -> float:
        """A numeric output of the last response; NVIDIA's model sends it as BYTES text."""
        return float(self.results[-1].as_numpy(name)[0])

    def datatype(self, name: str) -> str:
        """The wire datatype of an output of the last response."""
        outputs = self.results[-1].get_response().outputs
        return next(o.datatype for o in outputs if o.name == name)


async def ask(
    client: grpcclient.InferenceServerClient,
    request_id: str = "",
    timeout_s: float = 120.0,
    **values: Any,
) -> Answer:
    """One request on its own stream, read until the final response or an error."""
    done = asyncio.Event()

    async def one() -> AsyncIterator[dict[str, Any]]:
        yield {"model_name": MODEL, "inputs": inputs(**values), "request_id": request_id}
        await done.wait()

    answer = Answer()
    stream = client.stream_infer(one())
    try:
        async with asyncio.timeout(timeout_s):
            async for result, error in stream:
                if error is not None:
                    answer.error = str(error)
                    break
                answer.results.append(result)
                final = result.get_response().parameters.get("triton_final_response")
                if final is not None and final.bool_param:
                    break
    finally:
        done.set()
        stream.cancel()
    return answer
