"""BENCHMARK FIXTURE: a decoupled ``ensemble`` look-alike that streams words with no compute.

Why it exists: the tiny reference models spend milliseconds per token in torch, which hides
the gateway's own microseconds. This model answers the same external contract (it reads
``text_input``, ``max_tokens``, ``stream`` and the ``return_num_*`` flags, and accepts every
other input) and streams ``max_tokens`` short words, ``token_interval_us`` apart.

One pacer thread serves every open stream from a heap ordered by due time, so 1,000 streams
cost one thread, not 1,000. The last token carries ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``
(no extra empty response, like TensorRT-LLM's ensemble) and the token counters, when asked.
A cancelled stream (the client left) is dropped at its next check, every ``CANCEL_EVERY``
tokens: ``is_cancelled()`` is a round trip to the server, too dear for every token.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

WORDS = (" lorem", " ipsum", " dolor", " sit", " amet", " consectetur", " adipiscing", " elit")
TEXTS = tuple(np.array([[w.encode()]], dtype=np.object_) for w in WORDS)
CANCEL_EVERY = 16


@dataclass(order=True)
class _Stream:
    """One open request: when its next token is due, and how many are left to send."""

    due: float
    seq: int
    sender: Any = field(compare=False)
    left: int = field(compare=False)
    sent: int = field(default=0, compare=False)
    prompt_words: int = field(default=0, compare=False)
    stream: bool = field(default=True, compare=False)
    counters: bool = field(default=False, compare=False)


def _scalar(request: Any, name: str, default: Any) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else tensor.as_numpy().reshape(-1)[0]


class TritonPythonModel:
    """Triton entry point: ``execute`` queues requests, the pacer thread answers them."""

    def initialize(self, args: dict[str, str]) -> None:
        params = json.loads(args["model_config"]).get("parameters", {})

        def param(key: str) -> float:
            return float(params.get(key, {}).get("string_value") or 0) / 1e6

        self.interval = param("token_interval_us")
        self.first_delay = param("first_token_delay_us")
        self.heap: list[_Stream] = []
        self.seq = itertools.count()
        self.wake = threading.Condition()
        self.stopping = False
        self.pacer = threading.Thread(target=self._pace, name="loadgen-pacer", daemon=True)
        self.pacer.start()

    def execute(self, requests: list[Any]) -> None:
        now = time.monotonic()
        streams = []
        for request in requests:
            sender = request.get_response_sender()
            text = _scalar(request, "text_input", None)
            max_tokens = int(_scalar(request, "max_tokens", 0))
            if text is None or max_tokens < 1:
                error = pb_utils.TritonError("text_input and max_tokens >= 1 must be given")
                sender.send(
                    pb_utils.InferenceResponse(output_tensors=[], error=error),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            stream = bool(_scalar(request, "stream", False))
            wait = self.first_delay + (0.0 if stream else self.interval * (max_tokens - 1))
            streams.append(
                _Stream(
                    now + wait,
                    next(self.seq),
                    sender,
                    max_tokens,
                    prompt_words=len(text.split()),
                    stream=stream,
                    counters=bool(_scalar(request, "return_num_output_tokens", False)),
                )
            )
        with self.wake:
            for item in streams:
                heapq.heappush(self.heap, item)
            self.wake.notify()
        return None

    def finalize(self) -> None:
        with self.wake:
            self.stopping = True
            self.wake.notify()
        self.pacer.join(timeout=5)

    def _pace(self) -> None:
        """Send every token that is due; sleep until the next one or a new request."""
        while True:
            with self.wake:
                while not self.stopping and (not self.heap or self.heap[0].due > time.monotonic()):
                    timeout = self.heap[0].due - time.monotonic() if self.heap else None
                    self.wake.wait(timeout)
                if self.stopping:
                    return
                item = heapq.heappop(self.heap)
            if self._send_next(item):
                item.due = max(item.due + self.interval, time.monotonic())
                with self.wake:
                    heapq.heappush(self.heap, item)

    def _send_next(self, item: _Stream) -> bool:
        """Send one response; True while the stream has more to send."""
        if item.sent % CANCEL_EVERY == CANCEL_EVERY - 1 and item.sender.is_cancelled():
            self._close(item.sender)
            return False
        count = item.left if not item.stream else 1
        last = count == item.left
        outputs = [pb_utils.Tensor("text_output", self._text(item, count))]
        item.sent += count
        item.left -= count
        if last and item.counters:
            outputs.append(pb_utils.Tensor("num_input_tokens", _int32(item.prompt_words)))
            outputs.append(pb_utils.Tensor("num_output_tokens", _int32(item.sent)))
        flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if last else 0
        try:
            item.sender.send(pb_utils.InferenceResponse(output_tensors=outputs), flags=flags)
        except Exception:  # the request is gone (cancelled or the server is stopping)
            return False
        return not last

    @staticmethod
    def _text(item: _Stream, count: int) -> np.ndarray:
        if count == 1:
            return TEXTS[item.sent % len(TEXTS)]
        words = (WORDS[(item.sent + i) % len(WORDS)] for i in range(count))
        return np.array([["".join(words).encode()]], dtype=np.object_)

    @staticmethod
    def _close(sender: Any) -> None:
        with contextlib.suppress(Exception):  # the request is gone already
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)


def _int32(value: int) -> np.ndarray:
    return np.array([[value]], dtype=np.int32)
