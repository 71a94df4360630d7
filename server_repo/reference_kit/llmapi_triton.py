"""The decoupled Python-backend body of a reference ``llmapi`` model (NVIDIA's PyTorch path).

It behaves as NVIDIA's ``tensorrt_llm`` model of triton_backend/all_models/llmapi (model.py at
TensorRT-LLM 044a90d209e380c95e23e8ae42f3583fa05ada78) does on the wire:

- ``execute`` answers at once and generates on a small thread pool (``workers``, 2);
- streaming sends one response per new token, each with the cumulative text, the last one
  flagged ``TRITONSERVER_RESPONSE_COMPLETE_FINAL`` (no empty final response); unstreamed, one
  response flagged final;
- a failure is ``Error generating request: <why>``, with a ``text_output`` of ``"N/A"``;
- every ``cancellation_check_period_ms`` (100, as NVIDIA's default) a loop asks Triton which
  requests their clients cancelled, stops them and answers ``Request cancelled by client``
  (``CANCELLED``);
- a request with ``stop`` true stops the requests carrying its request id and is itself
  answered ``Request cancelled by client``. (NVIDIA's model then leaves an unstreamed target
  without a final response; here the target ends with what it has and ``finish_reason``
  ``cancelled``, so no client waits for ever.)

Parsing is ``llmapi_request``; response values are ``llmapi_outputs``; tokens come from the
kit's ``ReferenceEngine``.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from server_repo.reference_kit.engine import ReferenceEngine, load_engine
from server_repo.reference_kit.llmapi_outputs import (
    ResponseState,
    TextTracker,
    Timing,
    finish_reason,
    response_outputs,
)
from server_repo.reference_kit.llmapi_request import (
    LlmapiError,
    LlmapiOptions,
    LlmapiRequest,
    parse_llmapi,
    scalar,
)
from server_repo.reference_kit.pb_tensors import read_inputs, to_pb_tensors
from server_repo.reference_kit.prefix_cache import DEFAULT_MAX_CACHED_TOKENS
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.weights import publish_pretrained_tokenizer

ERROR_PREFIX = "Error generating request: "
CANCELLED_MESSAGE = "Request cancelled by client"
DEFAULT_CANCELLATION_CHECK_MS = 100
# TensorRT-LLM's PyTorch-backend KV block size (kv_cache_config.tokens_per_block), which
# `mmgw trtllm-repo --backend llmapi` writes out too: kv_cache_reused_block counts these.
TOKENS_PER_BLOCK = 32
METRIC_BATCH = 8  # tokens per metric update: each one is a round trip to the server


@dataclass
class Active:
    """A request being generated: who asked, where answers go, whether it must stop."""

    user_id: str
    sender: Any
    aborted: threading.Event = field(default_factory=threading.Event)
    _final: threading.Lock = field(default_factory=threading.Lock)
    _final_sent: bool = False

    def claim_final(self) -> bool:
        """True for the one caller that may send the final response (worker or canceller)."""
        with self._final:
            if self._final_sent:
                return False
            self._final_sent = True
            return True

    def cancelled(self) -> bool:
        """Whether the client cancelled, asked only while no final response has been claimed.

        Triton frees a request's response factory once its final response is sent, and
        ``is_cancelled()`` then reads freed memory in the server. tritonserver 2.51 died of
        SIGSEGV in ``TRITONBACKEND_ResponseFactoryIsCancelled`` when the cancellation loop
        asked about a request its worker had just finished. Asking under the final response's
        lock, and never after it was claimed, closes that race. The worker then waits at most
        one ``is_cancelled()`` round trip to claim it.
        """
        with self._final:
            return not self._final_sent and bool(self.sender.is_cancelled())


def _parameters(model_config: dict[str, Any]) -> dict[str, str]:
    raw = model_config.get("parameters", {}) or {}
    return {key: str(value.get("string_value", "")) for key, value in raw.items()}


class LlmapiTritonModel:
    """Triton ``TritonPythonModel`` body; subclasses set ``family``."""

    family: ClassVar[str]

    def initialize(self, args: dict[str, str]) -> None:
        import triton_python_backend_utils as pb_utils

        self.pb = pb_utils
        config = json.loads(args["model_config"])
        params = _parameters(config)
        self.engine: ReferenceEngine = load_engine(
            self.family,
            checkpoint=params.get("checkpoint") or None,
            tokens_per_block=int(params.get("tokens_per_block") or TOKENS_PER_BLOCK),
            max_cached_tokens=int(params.get("max_cached_tokens") or DEFAULT_MAX_CACHED_TOKENS),
        )
        publish_pretrained_tokenizer(self.engine.assets.tokenizer, config["name"])
        # A Triton custom metric, so tests can watch generation stop when a request is cancelled.
        self.token_family = pb_utils.MetricFamily(
            name="mmgw_reference_generated_tokens_total",
            description="Tokens generated by the reference model",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.tokens_metric = self.token_family.Metric(labels={"model": config["name"]})
        self.metric_lock = threading.Lock()
        period_ms = int(params.get("cancellation_check_period_ms") or 0)
        self.check_period_s = (period_ms or DEFAULT_CANCELLATION_CHECK_MS) / 1000
        self.active: dict[int, Active] = {}
        self.active_lock = threading.Lock()
        self.running = True
        self.pool = ThreadPoolExecutor(
            max(1, int(params.get("workers") or 2)), thread_name_prefix=config["name"]
        )
        self.canceller = threading.Thread(target=self._cancellation_loop, daemon=True)
        self.canceller.start()

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            arrival = time.monotonic_ns()
            sender = request.get_response_sender()
            user_id = request.request_id() or ""
            try:
                tensors = read_inputs(request)
                if scalar(tensors, "stop"):
                    self._stop(user_id, sender)
                    continue
                parsed, options = parse_llmapi(tensors)
            except (LlmapiError, InvalidRequest) as exc:
                self._send_error(sender, ERROR_PREFIX + str(exc))
                continue
            active = Active(user_id, sender)
            with self.active_lock:
                self.active[id(active)] = active
            self.pool.submit(self._serve, active, parsed, options, Timing(arrival))
        return None

    def finalize(self) -> None:
        """Stop running generations at their next step, then wait for the workers."""
        self.running = False
        with self.active_lock:
            for active in self.active.values():
                active.aborted.set()
        self.canceller.join()
        self.pool.shutdown(wait=True, cancel_futures=True)
        del self.tokens_metric  # Triton requires a metric to go before its family
        del self.token_family

    def _serve(
        self, active: Active, request: LlmapiRequest, options: LlmapiOptions, timing: Timing
    ) -> None:
        """Generate and answer; any failure becomes an error response, never a hang."""
        try:
            self._generate(active, request, options, timing)
        except (LlmapiError, InvalidRequest) as exc:
            if active.claim_final():
                self._send_error(active.sender, ERROR_PREFIX + str(exc))
        except Exception as exc:
            self.pb.Logger.log_error(f"llmapi reference failed: {traceback.format_exc()}")
            if active.claim_final():
                self._send_error(active.sender, ERROR_PREFIX + str(exc))
        finally:
            with self.active_lock:
                self.active.pop(id(active), None)

    def _generate(
        self, active: Active, request: LlmapiRequest, options: LlmapiOptions, timing: Timing
    ) -> None:
        engine = self.engine
        timing.first_scheduled_ns = time.monotonic_ns()
        prepared = engine.prepare(request)
        prefix = "" if options.exclude_input else engine.decode(list(prepared.prompt.token_ids))
        stops = [(text, engine.encode(text)) for text in options.stop_strings]
        tracker = TextTracker(engine.decode, stops, prefix)
        generation = engine.run(prepared, is_cancelled=active.aborted.is_set)
        pending: dict[str, np.ndarray] | None = None
        shown, cumulative = prefix, 0.0
        for step in generation:
            timing.last_token_ns = time.monotonic_ns()
            timing.first_token_ns = timing.first_token_ns or timing.last_token_ns
            tracker.add(step.token_id)
            cumulative = step.cum_log_prob or 0.0
            if len(tracker.tokens) % METRIC_BATCH == 0:
                self._count_tokens(METRIC_BATCH)
            if not options.streaming:
                continue
            if pending is not None and not active.aborted.is_set():
                # Sent one step late, so that the last one can carry the final flag.
                self._send(active.sender, pending, final=False)
                pending = None
            text = tracker.visible()
            if text != shown:
                state = ResponseState(text, cumulative_logprob=cumulative)
                pending = response_outputs(state, generation.stats, timing, options)
                shown = text
        self._count_tokens(len(tracker.tokens) % METRIC_BATCH)
        text = tracker.final(generation.stats.finish_reason)
        reason = finish_reason(generation.stats)
        state = ResponseState(text, reason, tracker.stop_reason, cumulative)
        if active.claim_final():
            outputs = response_outputs(state, generation.stats, timing, options)
            self._send(active.sender, outputs, final=True)

    def _cancellation_loop(self) -> None:
        """NVIDIA's loop: every period, stop and answer the requests their clients cancelled."""
        while self.running:
            time.sleep(self.check_period_s)
            with self.active_lock:
                waiting = [a for a in self.active.values() if not a.aborted.is_set()]
            for active in waiting:
                try:
                    cancelled = active.cancelled()
                except Exception:
                    continue
                if cancelled:
                    active.aborted.set()
                    if active.claim_final():
                        self._send_error(active.sender, CANCELLED_MESSAGE, cancelled=True)

    def _stop(self, user_id: str, sender: Any) -> None:
        """A ``stop`` request: stop every request with its id, then answer it as cancelled."""
        if not user_id:
            self._send_error(sender, "A request id must be provided for request cancellation")
            return
        with self.active_lock:
            for active in self.active.values():
                if active.user_id == user_id:
                    active.aborted.set()
        self._send_error(sender, CANCELLED_MESSAGE, cancelled=True)

    def _count_tokens(self, count: int) -> None:
        if not count:
            return
        with self.metric_lock:
            self.tokens_metric.increment(count)

    def _send(self, sender: Any, outputs: dict[str, np.ndarray], final: bool) -> None:
        response = self.pb.InferenceResponse(output_tensors=to_pb_tensors(self.pb, outputs))
        flags = self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL if final else 0
        sender.send(response, flags=flags)

    def _send_error(self, sender: Any, message: str, cancelled: bool = False) -> None:
        """A final error response: ``CANCELLED`` for cancellations; otherwise NVIDIA's default
        code with its ``"N/A"`` text_output."""
        pb = self.pb
        outputs: list[Any] = []
        if cancelled:
            code = getattr(pb.TritonError, "CANCELLED", None)
            error = pb.TritonError(message, code) if code is not None else pb.TritonError(message)
        else:
            error = pb.TritonError(message)
            outputs = [pb.Tensor("text_output", np.array([b"N/A"], dtype=np.object_))]
        try:
            sender.send(
                pb.InferenceResponse(output_tensors=outputs, error=error),
                flags=pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        except Exception:
            pb.Logger.log_warn(f"could not deliver error response: {message}")
