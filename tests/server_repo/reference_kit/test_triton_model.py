"""The shared Python-backend adapter, driven with a stand-in ``triton_python_backend_utils``.

The real tritonserver tests (tests/server_repo/reference/) cover the wire; these pin down what
is hard to provoke over gRPC: the exact response sequence and the stop on cancellation.
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from server_repo.reference_kit.triton_model import ReferenceTritonModel

FINAL = 1


class FakeError:
    INVALID_ARG, INTERNAL = "INVALID_ARG", "INTERNAL"

    def __init__(self, message: str, code: str | None = None) -> None:
        self.message, self.code = message, code


class FakeMetric:
    def __init__(self) -> None:
        self.value = 0

    def increment(self, count: int) -> None:
        self.value += count


class FakeMetricFamily:
    COUNTER = "counter"

    def __init__(self, name: str, description: str, kind: str) -> None:
        self.name = name

    def Metric(self, labels: dict[str, str]) -> FakeMetric:
        return FakeMetric()


@dataclass
class FakeSender:
    cancel_after: int | None = None
    sent: list[tuple[Any, int]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def send(self, response: Any = None, flags: int = 0) -> None:
        self.sent.append((response, flags))
        if flags == FINAL:
            self.done.set()

    def is_cancelled(self) -> bool:
        return self.cancel_after is not None and len(self.sent) >= self.cancel_after


@dataclass
class FakeRequest:
    tensors: dict[str, np.ndarray]
    sender: FakeSender

    def inputs(self) -> list[Any]:
        return [
            SimpleNamespace(name=lambda n=name: n, as_numpy=lambda a=array: a)
            for name, array in self.tensors.items()
        ]

    def get_response_sender(self) -> FakeSender:
        return self.sender


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch, reference_cache: Path) -> ReferenceTritonModel:
    fake = SimpleNamespace(
        TRITONSERVER_RESPONSE_COMPLETE_FINAL=FINAL,
        Tensor=lambda name, array: (name, array),
        InferenceResponse=lambda output_tensors, error=None: SimpleNamespace(
            outputs=dict(output_tensors), error=error
        ),
        TritonError=FakeError,
        MetricFamily=FakeMetricFamily,
        Logger=SimpleNamespace(**{n: staticmethod(print) for n in ("log_info", "log_error",
                                                                   "log_warn", "log_verbose")}),
    )  # fmt: skip
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake)
    monkeypatch.setenv("MMGW_REFERENCE_CACHE", str(reference_cache))
    monkeypatch.setenv("MMGW_REFERENCE_DEVICE", "cpu")

    class Model(ReferenceTritonModel):
        family = "llava"

    config = {
        "name": "reference_llava",
        "input": [{"name": n} for n in ("text_input", "max_tokens", "min_length", "random_seed")],
        "parameters": {"workers": {"string_value": "2"}, "tokens_per_block": {"string_value": "8"}},
    }
    instance = Model()
    instance.initialize({"model_config": json.dumps(config)})
    yield instance
    instance.finalize()


def _request(max_tokens: int, stream: bool, sender: FakeSender) -> FakeRequest:
    tensors = {
        "text_input": np.array([[b"Tell me a story."]], dtype=np.object_),
        "max_tokens": np.array([[max_tokens]], dtype=np.int32),
        "stream": np.array([[stream]]),
        "return_num_output_tokens": np.array([[True]]),
    }
    return FakeRequest(tensors, sender)


def _run(model: ReferenceTritonModel, *requests: FakeRequest) -> None:
    assert model.execute(list(requests)) is None  # decoupled: responses go through senders
    for request in requests:
        assert request.sender.done.wait(30)


def test_stream_sends_one_response_per_token_then_final(model: ReferenceTritonModel) -> None:
    streamed, whole = FakeSender(), FakeSender()
    _run(model, _request(6, True, streamed), _request(6, False, whole))
    assert [flags for _, flags in streamed.sent] == [0] * 6 + [FINAL]
    assert streamed.sent[-1][0] is None
    deltas = [r.outputs["text_output"][0, 0].decode() for r, _ in streamed.sent[:-1]]
    counts = [int(r.outputs["num_output_tokens"][0, 0]) for r, _ in streamed.sent[:-1]]
    assert counts == [1, 2, 3, 4, 5, 6]
    assert [flags for _, flags in whole.sent] == [0, FINAL]
    assert whole.sent[0][0].outputs["text_output"][0, 0].decode() == "".join(deltas)


def _scored_request(stream: bool, sender: FakeSender) -> FakeRequest:
    request = _request(5, stream, sender)
    request.tensors["return_log_probs"] = np.array([[True]])
    request.tensors["return_generation_logits"] = np.array([[True]])
    return request


def test_log_probs_and_logits_per_response(model: ReferenceTritonModel) -> None:
    streamed, whole = FakeSender(), FakeSender()
    _run(model, _scored_request(True, streamed), _scored_request(False, whole))
    # No normalize_log_probs parameter: the backend's default, normalized, so greedy gives 0
    # while cum_log_probs sums the unnormalized values.
    assert model.engine.normalize_log_probs
    responses = [r.outputs for r, _ in streamed.sent[:-1]]
    assert len(responses) == 5
    vocab = model.engine.model.config.get_text_config(decoder=True).vocab_size
    for count, outputs in enumerate(responses, start=1):
        assert outputs["output_log_probs"].shape == (1, 1, count)  # all tokens so far
        assert outputs["output_log_probs"].tolist() == [[[0.0] * count]]
        assert outputs["cum_log_probs"].shape == (1, 1) and outputs["cum_log_probs"][0, 0] < 0
        assert outputs["generation_logits"].shape == (1, 1, 1, vocab)  # this token only
    one = whole.sent[0][0].outputs
    assert one["output_log_probs"].shape == (1, 1, 5)
    # The two requests share in-flight batches of different compositions (as on an engine),
    # so their float sums may differ in the last bits: the same values, not the same bits.
    np.testing.assert_allclose(one["cum_log_probs"], responses[-1]["cum_log_probs"], rtol=1e-5)
    assert one["generation_logits"].shape == (1, 1, 5, vocab)
    streamed_logits = np.concatenate([o["generation_logits"] for o in responses], axis=2)
    np.testing.assert_allclose(one["generation_logits"], streamed_logits, rtol=1e-4, atol=1e-5)
    scores = ("cum_log_probs", "output_log_probs", "generation_logits")
    assert all(o[name].dtype == np.float32 for o in [one, *responses] for name in scores)


def test_invalid_request_gets_an_error_and_final_flag(model: ReferenceTritonModel) -> None:
    sender = FakeSender()
    _run(model, _request(0, True, sender))
    ((response, flags),) = sender.sent
    assert flags == FINAL and response.error.code == "INVALID_ARG"
    assert "max_tokens" in response.error.message


def test_cancellation_stops_generating(model: ReferenceTritonModel) -> None:
    sender = FakeSender(cancel_after=2)
    _run(model, _request(200, True, sender))
    assert len(sender.sent) == 3 and sender.sent[-1] == (None, FINAL)
