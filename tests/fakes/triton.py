"""An in-process fake of one Triton Inference Server serving TensorRT-LLM models.

It stands in for what cannot run in a unit test, the TensorRT-LLM engine behind ``tritonserver``,
and implements the gateway's ``TritonBackend`` Protocol (``gateway/triton/backend.py``) with the
same four calls as ``TritonClient``. It speaks two contracts of ``docs/triton-contract.md``:

- the TensorRT-LLM multimodal ``ensemble`` contract of triton-contract.md section 2 (inputs
  ``text_input``, ``max_tokens``, ``image_input`` FP16 or ``image_bytes_input`` UINT8,
  ``video_bytes_input``, sampling and penalty scalars, ``stop_words``, ``stream``,
  ``prompt_table_extra_id``, the ``return_*`` flags; outputs ``text_output``,
  ``num_input_tokens``, ``num_output_tokens``, ``kv_cache_reused_blocks``), in both spellings
  TensorRT-LLM has used (v0.19's ``min_length``/``random_seed``, later ``min_tokens``/``seed``);
  decoupled, it streams one response per token holding only that token's text, as the ensemble
  streams deltas;
- the Whisper "direct" encoder-decoder ``tensorrt_llm`` contract of triton-contract.md section 4
  (``encoder_input_features`` FP16, ``input_lengths``, ``decoder_input_ids``,
  ``request_output_len``, ``end_id``, ``streaming``...; outputs ``output_ids`` and
  ``sequence_length``), answering with ids of the byte vocabulary the reference Whisper ships.

Model configs (``triton_configs.py``) are the dicts ``get_model_config(name, as_json=True)
["config"]`` returns, with the names, dtypes and dims of ``server_repo/reference/*/config.pbtxt``.

``stream`` builds the request with the client's own ``request_message`` (tritonclient's builder) as
``TritonClient.stream`` does, then reads it back the way Triton does (``triton_requests.py``):
every input must be declared, of the declared datatype, of rank 1 + len(dims) with the batch
first and the fixed dims matching, and every required input present; a violation is the error
response Triton would send, raised as ``translate_error`` maps it. Every accepted request is
recorded with its inputs decoded into numpy (``requests``). Generation is scripted
(``script``): the tokens, a delay before each, an error response after k tokens, a hang after k
tokens (nothing more until cancelled) and the KV-cache blocks reported reused. A request left
before its final response (the consumer closed the iterator, or its task was cancelled) is
recorded in ``cancelled``.

Not imitated: sampling (the script is the answer whatever the temperature), ``stop_words`` and
``end_id`` (recorded, not applied: the gateway cuts stop strings in the text itself), beam search.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

from gateway.errors import UpstreamUnavailable
from gateway.families.whisper.tokens import WhisperTokenizer, load_tokenizer
from gateway.triton.backend import Route
from gateway.triton.client import request_message, translate_error
from gateway.triton.contract import ModelContract, parse_model_config
from gateway.triton.outputs import is_final
from tests.fakes.triton_configs import (
    WHISPER_FRAMES,
    WHISPER_LANGUAGES,
    WHISPER_MELS,
    default_configs,
)
from tests.fakes.triton_llmapi import llmapi_answer
from tests.fakes.triton_requests import ReceivedRequest, TritonRejected, read_request
from tests.fakes.triton_wire import infer_response


@dataclass
class Script:
    """What the fake engine answers, whatever it is asked (within ``max_tokens``)."""

    tokens: Sequence[str] = ("The", " fake", " engine", " answers", " in", " tokens", ".")
    delay_s: float = 0.0  # before each token
    fail_after: int | None = None  # an error response after this many tokens
    error: str = "Executor failed: CUDA error: an illegal memory access was encountered"
    hang_after: int | None = None  # after this many tokens, nothing more until cancelled
    # After this many tokens the connection drops: gRPC UNAVAILABLE, as when the server dies.
    unavailable_after: int | None = None
    kv_cache_reused_blocks: int = 0  # reported with return_perf_metrics
    # Whisper: the window's speech, the language it detects, the end of its one segment.
    transcript: str = " The quick brown fox."
    language: str = "en"
    segment_end_s: float = 1.0
    # With return_log_probs: token i's log probability; with return_generation_logits: the
    # logits row token i was chosen from (one value per vocabulary id).
    log_probs: Sequence[float] = (-0.5, -1.25, -0.75, -2.0, -0.1, -3.0, -0.05)
    logits: Sequence[Sequence[float]] = ()


@dataclass
class _Events:
    """Per request id, an ``asyncio.Event`` tests can await."""

    events: dict[str, asyncio.Event] = field(default_factory=dict)

    def get(self, key: str) -> asyncio.Event:
        return self.events.setdefault(key, asyncio.Event())

    async def wait(self, key: str, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self.get(key).wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True


class FakeTriton:
    """One fake Triton server (``TritonBackend``) holding ``configs``, shared by every request.

    Switches: ``down`` (unreachable: no config, not ready, every stream UNAVAILABLE),
    ``unready`` (model names loaded but not at ready state) and ``hung`` (connected but
    answering nothing, as a stopped process: probes and streams wait until cancelled).
    """

    def __init__(
        self, configs: Iterable[dict[str, Any]] | None = None, url: str = "fake-triton:8001"
    ) -> None:
        self.url = url
        self.configs = {c["name"]: c for c in (configs or default_configs())}
        self.closed = False
        self.reset()

    def reset(self) -> None:
        """Forget every request and go back to the default script, up and ready."""
        self.script = Script()
        self.down = False
        self.hung = False
        self.unready: set[str] = set()
        self.requests: list[ReceivedRequest] = []
        self.cancelled: list[str] = []
        self.config_reads: list[str] = []
        self.active = 0  # requests being answered now, and the most at once
        self.peak = 0
        self._arrived = _Events()
        self._cancels = _Events()

    # -- what tests read ----------------------------------------------------------------------

    def request(self, request_id: str) -> ReceivedRequest:
        return next(r for r in self.requests if r.request_id == request_id)

    async def wait_started(self, request_id: str, timeout: float = 5.0) -> ReceivedRequest:
        """The request, once it has reached the fake."""
        if not await self._arrived.wait(request_id, timeout):
            raise AssertionError(f"request {request_id!r} never reached the fake Triton")
        return self.request(request_id)

    async def wait_cancelled(self, request_id: str, timeout: float = 5.0) -> bool:
        """Whether ``request_id`` was cancelled before its final response (within timeout)."""
        return await self._cancels.wait(request_id, timeout)

    # -- TritonBackend ------------------------------------------------------------------------

    async def contract(self, model_name: str) -> ModelContract:
        self.config_reads.append(model_name)
        config = self.configs.get(model_name)
        if self.down or config is None:
            why = "failed to connect to all addresses" if self.down else "model not found"
            raise UpstreamUnavailable(
                f"cannot read the config of Triton model {model_name!r} at {self.url}: {why}"
            )
        return parse_model_config(json.loads(json.dumps(config)))

    async def is_ready(self, model_names: Sequence[str] = ()) -> bool:
        if self.hung:
            await asyncio.Event().wait()
        if self.down:
            return False
        return all(n in self.configs and n not in self.unready for n in model_names)

    async def close(self) -> None:
        self.closed = True

    async def stream(
        self,
        model_name: str,
        inputs: Sequence[grpcclient.InferInput],
        request_id: str,
        outputs: Sequence[str] = (),
        route: Route | None = None,
    ) -> AsyncIterator[service_pb2.ModelInferResponse]:
        request = request_message(model_name, inputs, request_id, outputs)
        if self.down:
            raise _unavailable()
        if self.hung:
            await asyncio.Event().wait()
        ended = False  # by the fake: its final response or an error response
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            # As TritonClient reads the stream: an error message raises, a final flag ends it.
            async with aclosing(self._serve(request)) as messages:
                async for message in messages:
                    if message.error_message:
                        ended = True
                        raise translate_error(InferenceServerException(message.error_message))
                    ended = is_final(message.infer_response)
                    yield message.infer_response
                    if ended:
                        break
        finally:
            self.active -= 1
            if not ended:
                self.cancelled.append(request_id)
                self._cancels.get(request_id).set()

    # -- the server side ----------------------------------------------------------------------

    async def _serve(
        self, request: service_pb2.ModelInferRequest
    ) -> AsyncIterator[service_pb2.ModelStreamInferResponse]:
        try:
            received, config = read_request(request, self.configs, self.unready)
        except TritonRejected as exc:
            yield service_pb2.ModelStreamInferResponse(error_message=str(exc))
            return
        self.requests.append(received)
        self._arrived.get(received.request_id).set()
        names = {entry["name"] for entry in config.get("input", [])}
        answer = self._whisper if "encoder_input_features" in names else self._ensemble
        if "sampling_param_max_tokens" in names:
            answer = self._llmapi
        try:
            async for response in answer(received, config):
                yield service_pb2.ModelStreamInferResponse(infer_response=response)
        except TritonRejected as exc:
            yield service_pb2.ModelStreamInferResponse(error_message=str(exc))

    async def _paced(self, items: Sequence[Any]) -> AsyncIterator[Any]:
        """``items`` one by one under the script: delay, error after k, hang after k."""
        script = self.script
        for index in range(len(items) + 1):
            if script.fail_after == index:
                raise TritonRejected(script.error)
            if script.unavailable_after == index:
                raise _unavailable()
            if script.hang_after == index:
                await asyncio.Event().wait()  # until the request is cancelled
            if index == len(items):
                return
            if script.delay_s:
                await asyncio.sleep(script.delay_s)
            yield items[index]

    async def _ensemble(
        self, request: ReceivedRequest, config: dict
    ) -> AsyncIterator[service_pb2.ModelInferResponse]:
        """One response per token (``stream``) or one with the whole text, then the final one
        with the counters the request asked for."""
        stream = bool(request.scalar("stream"))
        decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled"))
        if stream and not decoupled:
            raise TritonRejected(
                "streaming is only supported if model is deployed using decoupled mode"
            )
        max_tokens = int(request.scalar("max_tokens"))
        tokens = list(self.script.tokens[:max_tokens])
        ids = {"model": request.model, "request_id": request.request_id}
        scores = _Scores(self.script, request)
        async for token in self._paced(tokens):
            if stream:
                yield infer_response(**ids, text_output=_text(token), **scores.next())
        counters: dict[str, np.ndarray] = {}
        if request.scalar("return_num_input_tokens"):
            # A byte-level tokenizer: one prompt token per UTF-8 byte of text_input.
            prompt = len(request.scalar("text_input").encode("utf-8"))
            counters["num_input_tokens"] = np.array([[prompt]], np.int32)
        if request.scalar("return_num_output_tokens"):
            counters["num_output_tokens"] = np.array([[len(tokens)]], np.int32)
        if request.scalar("return_perf_metrics"):
            reused = self.script.kv_cache_reused_blocks
            counters["kv_cache_reused_blocks"] = np.array([[reused]], np.int32)
        if not stream:
            counters["text_output"] = _text("".join(tokens))
        yield infer_response(final=True, **ids, **_asked(counters, request.outputs))

    def _llmapi(
        self, request: ReceivedRequest, config: dict
    ) -> AsyncIterator[service_pb2.ModelInferResponse]:
        script = self.script
        return llmapi_answer(
            request, config, script.tokens, script.kv_cache_reused_blocks, self._paced
        )

    async def _whisper(
        self, request: ReceivedRequest, config: dict
    ) -> AsyncIterator[service_pb2.ModelInferResponse]:
        """Token ids of the scripted transcript (or, after a bare ``<|startoftranscript|>``,
        of the detected language), then ``end_id``, which ends the output and is not in it."""
        tokenizer = _whisper_tokenizer()
        prompt = [int(t) for t in request.inputs["decoder_input_ids"].reshape(-1)]
        max_new = int(request.scalar("request_output_len"))
        parameters = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        limit, seq_limit = int(parameters["max_input_len"]), int(parameters["max_seq_len"])
        if not 0 < len(prompt) <= limit:
            raise TritonRejected(
                f"decoder_input_ids must hold 1 to {limit} tokens, got {len(prompt)}"
            )
        if len(prompt) + max_new > seq_limit:
            raise TritonRejected(
                f"decoder_input_ids ({len(prompt)}) + request_output_len ({max_new}) exceeds "
                f"max_seq_len {seq_limit}"
            )
        features = request.inputs["encoder_input_features"]
        frames = request.scalar("input_lengths")
        if features.shape[1:] != (WHISPER_FRAMES, WHISPER_MELS) or frames != WHISPER_FRAMES:
            raise TritonRejected(
                f"encoder_input_features must be [{WHISPER_FRAMES}, {WHISPER_MELS}] with "
                f"input_lengths {WHISPER_FRAMES}, got {list(features.shape[1:])} and {frames}"
            )
        end_id = request.scalar("end_id")
        end_id = tokenizer.eot if end_id is None else int(end_id)
        script = self.script
        if prompt[-1] == tokenizer.sot:  # language detection: the token after SOT
            generated = [tokenizer.language_token(script.language)]
        else:
            generated = tokenizer.encode(script.transcript)
            if tokenizer.no_timestamps not in prompt:
                start, end = _timestamp(tokenizer, 0.0), _timestamp(tokenizer, script.segment_end_s)
                generated = [start, *generated, end]
        generated = [*generated, tokenizer.eot][:max_new]
        if end_id in generated:
            generated = generated[: generated.index(end_id)]
        stream = bool(request.scalar("streaming"))
        ids = {"model": request.model, "request_id": request.request_id}
        async for token in self._paced(generated):
            if stream:
                yield infer_response(**ids, **_ids_outputs([token]))
        if not stream:
            exclude = request.scalar("exclude_input_in_output")
            body = generated if exclude or exclude is None else [*prompt, *generated]
            yield infer_response(**ids, **_asked(_ids_outputs(body), request.outputs))
        yield infer_response(final=True, **ids)


def _unavailable() -> Exception:
    """What ``TritonClient`` raises when the server cannot be reached or the stream drops."""
    return translate_error(
        grpc.aio.AioRpcError(
            grpc.StatusCode.UNAVAILABLE,
            grpc.aio.Metadata(),
            grpc.aio.Metadata(),
            "failed to connect to all addresses",
        )
    )


class _Scores:
    """The log-prob outputs of each streamed response, as TensorRT-LLM streams them
    (docs/triton-contract.md section 8): ``output_log_probs`` [1, 1, n] holds all n tokens so
    far, ``generation_logits`` [1, 1, 1, vocab] only this response's token."""

    def __init__(self, script: Script, request: ReceivedRequest) -> None:
        self.script = script
        self.log_probs = bool(request.scalar("return_log_probs"))
        self.logits = bool(request.scalar("return_generation_logits"))
        self.sent = 0

    def next(self) -> dict[str, np.ndarray]:
        self.sent += 1
        outputs: dict[str, np.ndarray] = {}
        if self.log_probs:
            so_far = list(self.script.log_probs[: self.sent])
            outputs["output_log_probs"] = np.array([[so_far]], np.float32)
            outputs["cum_log_probs"] = np.array([[sum(so_far)]], np.float32)
        if self.logits:
            row = self.script.logits[self.sent - 1]
            outputs["generation_logits"] = np.array([[[row]]], np.float32)
        return outputs


def _text(text: str) -> np.ndarray:
    """``text_output`` as the ensemble sends it: BYTES [1, 1]."""
    return np.array([[text.encode("utf-8")]], dtype=np.object_)


def _ids_outputs(token_ids: list[int]) -> dict[str, np.ndarray]:
    """``output_ids`` [1, beam 1, T] and ``sequence_length`` [1, 1]."""
    return {
        "output_ids": np.array(token_ids, dtype=np.int32).reshape(1, 1, len(token_ids)),
        "sequence_length": np.array([[len(token_ids)]], dtype=np.int32),
    }


def _asked(outputs: dict[str, np.ndarray], asked: Sequence[str]) -> dict[str, np.ndarray]:
    """Only the outputs the request named (all of them when it named none)."""
    return outputs if not asked else {k: v for k, v in outputs.items() if k in asked}


def _timestamp(tokenizer: WhisperTokenizer, seconds: float) -> int:
    return tokenizer.timestamp_begin + round(seconds / 0.02)


def _whisper_tokenizer() -> WhisperTokenizer:
    """The reference Whisper's vocabulary (``vocabulary = "bytes"``, 99 languages)."""
    return load_tokenizer("bytes", WHISPER_LANGUAGES)
