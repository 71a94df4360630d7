"""Request tensors of NVIDIA's ``llmapi`` ``tensorrt_llm`` model -> the kit's request.

The contract (NVIDIA/TensorRT-LLM triton_backend/all_models/llmapi/tensorrt_llm/, config.pbtxt
at 0a71057313ec0626527e164a8fc0205c5822e2f5, 1/helpers.py at
0df60f9ad779c4dc4f55da07e08b969fc4684e56, 1/model.py at
044a90d209e380c95e23e8ae42f3583fa05ada78; facts, not code, carried over):

- ``max_batch_size: 0``: no batch dimension. ``text_input`` is ``[1]`` (only its first entry
  is read), ``image_url`` ``[N]``, ``sampling_param_stop`` ``[K]``, every other input ``[1]``;
  a "scalar" of another size fails with ``Expected a scalar tensor for tensor <name>``.
- ``sampling_param_<name>`` is ``SamplingParams(<name>=...)``: best_of, temperature, top_k,
  top_p, frequency_penalty, presence_penalty, max_tokens, seed, exclude_input_from_output,
  return_perf_metrics, stop (a list of strings). Unset ones keep the LLM API defaults (greedy
  unless temperature/top_k/top_p is given, 32 new tokens), except best_of (1) and
  exclude_input_from_output / return_perf_metrics (False: the prompt is echoed by default).
- ``return_finish_reason`` / ``return_stop_reason`` / ``return_cumulative_logprob`` pick the
  optional outputs; ``streaming`` streams; ``lora_id`` + ``lora_name`` + ``lora_path`` go
  together (``lora_ckpt_source`` "hf" or "nemo").
- ``image_url``: one entry per image. NVIDIA's backend loads ``http(s)`` URLs and ``data:``
  URIs; this reference cannot reach the network, so it takes ``data:`` URIs only and refuses
  anything else in NVIDIA's words (``Unsupported image_url '...': only ... URLs are
  accepted.``).

Errors are ``LlmapiError``: the Triton model answers them as NVIDIA's does,
``Error generating request: <message>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from server_repo.reference_kit.request import GenerationRequest

DEFAULT_MAX_TOKENS = 32  # tensorrt_llm.SamplingParams' default
LORA_CKPT_SOURCES = ("hf", "nemo")
SHOWN_URL_CHARS = 64


class LlmapiError(ValueError):
    """A request NVIDIA's model would fail; the message is what follows its error prefix."""


@dataclass(frozen=True)
class LlmapiRequest(GenerationRequest):
    """The kit's request plus the decoded ``image_url`` pictures (RGB ``[H, W, 3]``)."""

    pictures: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class LlmapiOptions:
    """What shapes the responses rather than the tokens."""

    streaming: bool = False
    exclude_input: bool = False
    stop_strings: tuple[str, ...] = ()
    finish_reason: bool = False
    stop_reason: bool = False
    cumulative_logprob: bool = False
    perf_metrics: bool = False


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes | np.bytes_) else str(value)


def scalar(tensors: Mapping[str, np.ndarray], name: str) -> Any:
    """A ``[1]`` input's value, None when absent (helpers.py ``get_input_scalar_by_name``)."""
    value = tensors.get(name)
    if value is None:
        return None
    if value.size != 1:
        raise LlmapiError(f"Expected a scalar tensor for tensor {name}")
    item = value.reshape(-1)[0]
    return item.item() if isinstance(item, np.generic) else item


def _option(tensors: Mapping[str, np.ndarray], name: str, cast: type, default: Any) -> Any:
    value = scalar(tensors, name)
    return default if value is None else cast(value)


def _strings(tensors: Mapping[str, np.ndarray], name: str) -> tuple[str, ...]:
    value = tensors.get(name)
    if value is None:
        return ()
    return tuple(text for text in (_text(v) for v in value.reshape(-1)) if text)


def prompt_text(tensors: Mapping[str, np.ndarray]) -> str:
    """``text_input[0]``: the finished prompt, or the user's text when images come along."""
    text_input = tensors.get("text_input")
    if text_input is None:
        raise LlmapiError("text_input is missing from the request")
    if text_input.ndim > 1:
        raise LlmapiError("The current implementation only supports text_input being a 1D tensor.")
    if text_input.size == 0:
        raise LlmapiError("text_input is empty")
    return _text(text_input[0])


def _shown(url: str) -> str:
    return url if len(url) <= SHOWN_URL_CHARS else url[:SHOWN_URL_CHARS] + "..."


def check_scheme(url: str) -> None:
    """Refuse what this offline reference cannot load, in the words of NVIDIA's check."""
    if not url.startswith("data:"):
        raise LlmapiError(f"Unsupported image_url '{_shown(url)}': only data URLs are accepted.")


def decode_image_url(url: str) -> np.ndarray:
    """A ``data:<type>;base64,<payload>`` image as RGB ``uint8 [H, W, 3]``."""
    check_scheme(url)
    header, sep, payload = url[len("data:") :].partition(",")
    if not sep:
        raise LlmapiError(f"Malformed data URL '{_shown(url)}': no ',' before the payload")
    if not header.endswith(";base64"):
        raise LlmapiError("Only base64 data URLs are supported for now.")
    try:
        raw = base64.b64decode(payload, validate=True)
        with Image.open(io.BytesIO(raw)) as image:
            return np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (binascii.Error, OSError, ValueError) as exc:
        raise LlmapiError(f"cannot decode image_url '{_shown(url)}': {exc}") from exc


def _pictures(tensors: Mapping[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    urls = [_text(url) for url in tensors.get("image_url", np.empty(0)).reshape(-1)]
    for url in urls:  # every URL is checked before any is decoded, as NVIDIA validates first
        check_scheme(url)
    return tuple(decode_image_url(url) for url in urls)


def content_key(images: Sequence[np.ndarray]) -> int:
    """A positive 63-bit id of the images' pixels. TensorRT-LLM's PyTorch backend keys image KV
    blocks by a hash of the image content; the kit's prefix cache takes it as the extra id."""
    digest = hashlib.blake2b(digest_size=8)
    for image in images:
        digest.update(str(image.shape).encode())
        digest.update(np.ascontiguousarray(image).tobytes())
    return int.from_bytes(digest.digest(), "little") >> 1 or 1


def check_lora(tensors: Mapping[str, np.ndarray]) -> None:
    """NVIDIA's LoRA checks (helpers.py ``get_lora_request_from_request``), then a refusal:
    this reference has no Hugging Face adapter loader."""
    given = [scalar(tensors, name) for name in ("lora_id", "lora_name", "lora_path")]
    if all(value is None for value in given):
        return
    if any(value is None for value in given):
        raise LlmapiError("lora_id, lora_name, and lora_path must all be provided together")
    source = scalar(tensors, "lora_ckpt_source")
    source = "hf" if source is None else _text(source)
    if source not in LORA_CKPT_SOURCES:
        raise LlmapiError(f"lora_ckpt_source must be one of {LORA_CKPT_SOURCES}, got {source!r}")
    path = _text(given[2])
    if not os.path.exists(path):
        raise LlmapiError(f"lora_path does not exist on the Triton server's filesystem: {path}")
    raise LlmapiError("LoRA adapters are not supported by this reference model")


def _sampling(tensors: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Token-choice settings: greedy unless temperature, top_k or top_p is given."""
    temperature = _option(tensors, "sampling_param_temperature", float, None)
    top_k = _option(tensors, "sampling_param_top_k", int, None)
    top_p = _option(tensors, "sampling_param_top_p", float, None)
    sampled = not (temperature is None and top_k is None and top_p is None)
    return {
        "temperature": 1.0 if temperature is None else temperature,
        "top_k": top_k or 0,
        "top_p": (1.0 if sampled else 0.0) if top_p is None else top_p,
        "seed": _option(tensors, "sampling_param_seed", int, 0),
        "presence_penalty": _option(tensors, "sampling_param_presence_penalty", float, 0.0),
        "frequency_penalty": _option(tensors, "sampling_param_frequency_penalty", float, 0.0),
    }


def parse_llmapi(tensors: Mapping[str, np.ndarray]) -> tuple[LlmapiRequest, LlmapiOptions]:
    """The kit request and response options of one llmapi request's tensors."""
    text = prompt_text(tensors)
    check_lora(tensors)
    best_of = _option(tensors, "sampling_param_best_of", int, 1)
    if best_of != 1:
        raise LlmapiError(
            f"sampling_param_best_of {best_of}: this reference returns one sequence per request"
        )
    max_tokens = _option(tensors, "sampling_param_max_tokens", int, DEFAULT_MAX_TOKENS)
    stop_strings = _strings(tensors, "sampling_param_stop")
    pictures = _pictures(tensors)
    options = LlmapiOptions(
        streaming=_option(tensors, "streaming", bool, False),
        exclude_input=_option(tensors, "sampling_param_exclude_input_from_output", bool, False),
        stop_strings=stop_strings,
        finish_reason=_option(tensors, "return_finish_reason", bool, False),
        stop_reason=_option(tensors, "return_stop_reason", bool, False),
        cumulative_logprob=_option(tensors, "return_cumulative_logprob", bool, False),
        perf_metrics=_option(tensors, "sampling_param_return_perf_metrics", bool, False),
    )
    request = LlmapiRequest(
        text_input=text,
        max_tokens=max_tokens,
        stop_words=stop_strings,
        return_log_probs=options.cumulative_logprob,
        pictures=pictures,
        extra_id=content_key(pictures) if pictures else None,
        **_sampling(tensors),
    )
    return request, options
