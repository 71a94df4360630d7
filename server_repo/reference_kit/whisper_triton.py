"""Triton bodies of the two reference Whisper models, over one ``WhisperEngine`` each.

- ``WhisperDirectModel`` (``reference_whisper``): TensorRT-LLM's encoder-decoder
  ``tensorrt_llm`` contract as NVIDIA's ``whisper_bls`` calls it: ``encoder_input_features``
  (fp16 log-mel ``[1, 3000, n_mels]``), ``input_lengths`` (3000), ``encoder_output_lengths``
  (1500), ``decoder_input_ids``, ``request_output_len``, ``end_id``, ``pad_id``, ``streaming``,
  sampling inputs -> ``output_ids`` ``[1, 1, T]`` and ``sequence_length``. Streaming sends each
  new token on its own; otherwise one response holds every token (the prompt too unless
  ``exclude_input_in_output``). ``end_id`` ends the output and is not part of it.
- ``WhisperBlsModel`` (``reference_whisper_bls``): NVIDIA's ``whisper_bls``: ``WAV`` (16 kHz,
  <= 30 s), ``WAV_LENS``, ``TEXT_PREFIX`` (empty: English, transcribe, no timestamps) ->
  ``TRANSCRIPTS``, special tokens stripped, cumulative when streaming, greedy, and at most 50
  new tokens, as NVIDIA's BLS asks of the decoder.

Parsing is pure numpy (testable without Triton); the response plumbing follows
``ReferenceTritonModel`` (errors as responses, never a hang; the generated-token metric).
Parameters: ``checkpoint``, ``workers``, ``max_input_len`` (the
decoder prompt cap; NVIDIA's engines are built with 14) and ``max_seq_len`` (prompt + output).
"""

from __future__ import annotations

import json
import threading
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from server_repo.reference_kit.pb_tensors import read_inputs, to_pb_tensors
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.whisper import (
    DEFAULT_PREFIX,
    ENCODER_FRAMES,
    Decoding,
    WhisperEngine,
    load_whisper_engine,
)

BLS_MAX_NEW_TOKENS = 50  # NVIDIA's whisper_bls asks tensorrt_llm for at most this many


@dataclass(frozen=True)
class Limits:
    """The decoder engine's build limits: prompt tokens and prompt + output tokens."""

    max_input_len: int = 64
    max_seq_len: int = 192

    @classmethod
    def from_parameters(cls, params: Mapping[str, str]) -> Limits:
        return cls(
            int(params.get("max_input_len") or cls.max_input_len),
            int(params.get("max_seq_len") or cls.max_seq_len),
        )


@dataclass(frozen=True)
class DirectJob:
    features: np.ndarray  # [n_mels, 3000] float32
    prompt: list[int]
    decoding: Decoding
    stream: bool
    exclude_input: bool


@dataclass(frozen=True)
class BlsJob:
    samples: np.ndarray  # [n] float32, 16 kHz
    prefix: str
    stream: bool


def _unbatch(tensors: Mapping[str, np.ndarray], name: str, required: bool = False) -> Any:
    value = tensors.get(name)
    if value is None:
        if required:
            raise InvalidRequest(f"{name} is required")
        return None
    if value.ndim == 0 or value.shape[0] != 1:
        raise InvalidRequest(f"{name}: send batch size 1 per request, got {list(value.shape)}")
    return value[0]


def _scalar(tensors: Mapping[str, np.ndarray], name: str, cast: type, default: Any) -> Any:
    value = _unbatch(tensors, name)
    if value is None:
        return default
    if value.size != 1:
        raise InvalidRequest(f"{name} must hold one value, got shape {list(value.shape)}")
    return cast(value.reshape(-1)[0])


def _decoding(tensors: Mapping[str, np.ndarray], max_new: int) -> Decoding:
    end_id = _scalar(tensors, "end_id", int, None)
    return Decoding(
        max_new_tokens=max_new,
        end_id=end_id,
        temperature=_scalar(tensors, "temperature", float, 1.0),
        top_k=_scalar(tensors, "runtime_top_k", int, 0),
        top_p=_scalar(tensors, "runtime_top_p", float, 0.0),
        seed=_scalar(tensors, "seed", int, 0) or _scalar(tensors, "random_seed", int, 0),
    )


def _features(tensors: Mapping[str, np.ndarray], n_mels: int) -> np.ndarray:
    mel = _unbatch(tensors, "encoder_input_features", required=True)
    if mel.ndim != 2 or mel.shape[1] != n_mels:
        raise InvalidRequest(
            f"encoder_input_features must be [frames, {n_mels}], got {list(mel.shape)}"
        )
    frames = _scalar(tensors, "input_lengths", int, None)
    if frames != mel.shape[0] or frames != ENCODER_FRAMES:
        raise InvalidRequest(
            f"input_lengths must be {ENCODER_FRAMES}, the frames sent; got {frames} for "
            f"{mel.shape[0]} frames"
        )
    output_lengths = _scalar(tensors, "encoder_output_lengths", int, frames // 2)
    if output_lengths != frames // 2:
        raise InvalidRequest(f"encoder_output_lengths must be {frames // 2}, got {output_lengths}")
    return np.ascontiguousarray(mel.T, dtype=np.float32)


def parse_direct(tensors: Mapping[str, np.ndarray], limits: Limits, n_mels: int) -> DirectJob:
    """The job for one ``tensorrt_llm``-style request, validated against ``limits``."""
    prompt = _unbatch(tensors, "decoder_input_ids", required=True).reshape(-1).tolist()
    if not prompt or len(prompt) > limits.max_input_len:
        raise InvalidRequest(
            f"decoder_input_ids must hold 1 to {limits.max_input_len} tokens, got {len(prompt)}"
        )
    max_new = _scalar(tensors, "request_output_len", int, None)
    if max_new is None:
        raise InvalidRequest("request_output_len is required")
    if len(prompt) + max_new > limits.max_seq_len:
        raise InvalidRequest(
            f"decoder_input_ids ({len(prompt)}) + request_output_len ({max_new}) exceeds "
            f"max_seq_len {limits.max_seq_len}"
        )
    return DirectJob(
        features=_features(tensors, n_mels),
        prompt=[int(t) for t in prompt],
        decoding=_decoding(tensors, max_new),
        stream=_scalar(tensors, "streaming", bool, False),
        exclude_input=_scalar(tensors, "exclude_input_in_output", bool, True),
    )


def parse_bls(tensors: Mapping[str, np.ndarray], stream: bool) -> BlsJob:
    """The job for one ``whisper_bls`` request: samples cut to ``WAV_LENS``, the prefix."""
    wav = _unbatch(tensors, "WAV", required=True).reshape(-1)
    length = _scalar(tensors, "WAV_LENS", int, wav.size)
    if not 0 < length <= wav.size:
        raise InvalidRequest(f"WAV_LENS must be within [1, {wav.size}], got {length}")
    raw = _unbatch(tensors, "TEXT_PREFIX", required=True).reshape(-1)[0]
    prefix = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    return BlsJob(wav[:length].astype(np.float32), prefix or DEFAULT_PREFIX, stream)


def ids_outputs(token_ids: list[int]) -> dict[str, np.ndarray]:
    """``output_ids`` ``[1, beam 1, T]`` and ``sequence_length`` ``[1, 1]``."""
    return {
        "output_ids": np.array([[token_ids]], dtype=np.int32).reshape(1, 1, len(token_ids)),
        "sequence_length": np.array([[len(token_ids)]], dtype=np.int32),
    }


def transcript_outputs(text: str) -> dict[str, np.ndarray]:
    return {"TRANSCRIPTS": np.array([[text.encode("utf-8")]], dtype=np.object_)}


class _WhisperTritonModel:
    """Loads the engine, parses requests at once, serves them on a small thread pool."""

    def initialize(self, args: dict[str, str]) -> None:
        import triton_python_backend_utils as pb_utils

        self.pb = pb_utils
        config = json.loads(args["model_config"])
        raw = config.get("parameters", {}) or {}
        params = {key: str(value.get("string_value", "")) for key, value in raw.items()}
        self.limits = Limits.from_parameters(params)
        self.decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled"))
        self.engine: WhisperEngine = load_whisper_engine(
            checkpoint=params.get("checkpoint") or None
        )
        self._stopping = False
        # Triton 2.51's server crashes (SIGSEGV in libtriton_python.so) when two worker threads
        # of one stub update a custom metric at once: metric updates and sends are serialised.
        self._ipc_lock = threading.Lock()
        # The same Triton custom metric as the other reference models (tests watch it).
        self.token_family = pb_utils.MetricFamily(
            name="mmgw_reference_generated_tokens_total",
            description="Tokens generated by the reference model",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.tokens_metric = self.token_family.Metric(labels={"model": config["name"]})
        workers = max(1, int(params.get("workers") or 2))
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix=f"{config['name']}-worker")
        pb_utils.Logger.log_info(
            f"{config['name']}: serving {self.engine.assets.directory} on "
            f"{self.engine.assets.device} with {workers} workers"
        )

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            sender = request.get_response_sender()
            try:
                job = self.parse(read_inputs(request))
            except InvalidRequest as exc:
                self._send_error(sender, str(exc), invalid=True)
                continue
            self.pool.submit(self._guarded, job, sender)
        return None

    def finalize(self) -> None:
        """Stop running generations at their next step, then wait for the workers."""
        self._stopping = True
        self.pool.shutdown(wait=True, cancel_futures=True)
        del self.tokens_metric  # Triton requires a metric to go before its family
        del self.token_family

    def parse(self, tensors: Mapping[str, np.ndarray]) -> Any:
        raise NotImplementedError

    def respond(self, job: Any, send: Callable, cancelled: Callable[[], bool]) -> None:
        raise NotImplementedError

    def count_token(self) -> None:
        with self._ipc_lock:
            self.tokens_metric.increment(1)

    def _guarded(self, job: Any, sender: Any) -> None:
        """Serve one job; any failure becomes an error response, never a hang."""
        try:
            self.respond(
                job,
                lambda outputs: self._send(sender, outputs),
                lambda: self._stopping or sender.is_cancelled(),
            )
            self._send_final(sender)
        except InvalidRequest as exc:
            self._send_error(sender, str(exc), invalid=True)
        except Exception as exc:
            self.pb.Logger.log_error(f"reference whisper failed: {traceback.format_exc()}")
            self._send_error(sender, f"internal error: {exc}", invalid=False)

    def _send(self, sender: Any, outputs: dict[str, np.ndarray]) -> None:
        response = self.pb.InferenceResponse(output_tensors=to_pb_tensors(self.pb, outputs))
        with self._ipc_lock:
            sender.send(response)

    def _send_final(self, sender: Any) -> None:
        """Close the response stream (also after a cancel, so Triton releases the request)."""
        try:
            with self._ipc_lock:
                sender.send(flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception:
            self.pb.Logger.log_verbose("response stream already closed")

    def _send_error(self, sender: Any, message: str, invalid: bool) -> None:
        code = getattr(self.pb.TritonError, "INVALID_ARG" if invalid else "INTERNAL", None)
        error = (
            self.pb.TritonError(message, code) if code is not None else self.pb.TritonError(message)
        )
        try:
            with self._ipc_lock:
                sender.send(
                    self.pb.InferenceResponse(output_tensors=[], error=error),
                    flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
        except Exception:
            self.pb.Logger.log_warn(f"could not deliver error response: {message}")


class WhisperDirectModel(_WhisperTritonModel):
    """``tensorrt_llm`` for Whisper: log-mel and prompt ids in, token ids out."""

    def parse(self, tensors: Mapping[str, np.ndarray]) -> DirectJob:
        job = parse_direct(tensors, self.limits, self.engine.n_mels)
        if job.stream and not self.decoupled:
            raise InvalidRequest("streaming is not supported by a non-decoupled model")
        return job

    def respond(self, job: DirectJob, send: Callable, cancelled: Callable[[], bool]) -> None:
        run = self.engine.generate(job.features, job.prompt, job.decoding, cancelled)
        end_id = self.engine.eot if job.decoding.end_id is None else job.decoding.end_id
        tokens: list[int] = []
        for token in run:
            self.count_token()
            if token == end_id:
                break
            tokens.append(token)
            if job.stream:
                send(ids_outputs([token]))
        if not job.stream and not run.stats.cancelled:
            send(ids_outputs(tokens if job.exclude_input else [*job.prompt, *tokens]))


class WhisperBlsModel(_WhisperTritonModel):
    """``whisper_bls``: 16 kHz samples and a text prefix in, the transcript out."""

    def parse(self, tensors: Mapping[str, np.ndarray]) -> BlsJob:
        return parse_bls(tensors, stream=self.decoupled)

    def respond(self, job: BlsJob, send: Callable, cancelled: Callable[[], bool]) -> None:
        prompt = self.engine.encode_prefix(job.prefix)
        if len(prompt) > self.limits.max_input_len:
            raise InvalidRequest(
                f"TEXT_PREFIX is {len(prompt)} tokens; the decoder takes at most "
                f"{self.limits.max_input_len}"
            )
        features = self.engine.features(job.samples)
        run = self.engine.generate(features, prompt, Decoding(BLS_MAX_NEW_TOKENS), cancelled)
        tokens: list[int] = []
        for token in run:
            self.count_token()
            tokens.append(token)
            if job.stream:
                send(transcript_outputs(self.engine.transcript(tokens)))
        if not job.stream and not run.stats.cancelled:
            send(transcript_outputs(self.engine.transcript(tokens)))
