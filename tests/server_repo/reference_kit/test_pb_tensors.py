"""Triton tensors <-> kit types: batch dims, version-dependent names, output shapes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from server_repo.reference_kit.pb_tensors import (
    InputNames,
    ReturnFlags,
    parse_request,
    read_inputs,
    response_outputs,
    score_outputs,
    to_pb_tensors,
)
from server_repo.reference_kit.request import GenerationStats, InvalidRequest, Step


def _scalar(value: object, dtype: object) -> np.ndarray:
    return np.array([[value]], dtype=dtype)


BASE = {
    "text_input": _scalar(b"What is this?", np.object_),
    "max_tokens": _scalar(7, np.int32),
}


def test_input_names_follow_the_declared_version() -> None:
    old = InputNames.from_config(["text_input", "min_length", "random_seed"])
    new = InputNames.from_config(["text_input", "min_tokens", "seed"])
    assert (old.min_tokens, old.seed) == ("min_length", "random_seed")
    assert (new.min_tokens, new.seed) == ("min_tokens", "seed")


def test_defaults_follow_trt_llm() -> None:
    request, flags = parse_request(BASE, InputNames())
    assert request.text_input == "What is this?" and request.max_tokens == 7
    assert request.greedy and request.end_id is None and request.extra_id is None
    assert request.images is None and request.video is None
    assert flags == ReturnFlags()


def test_family_inputs_image_sizes_and_decoder_text() -> None:
    tensors = {
        **BASE,
        "image_input": np.zeros((1, 3, 3, 336, 336), np.float16),
        "image_sizes_input": np.array([[[300, 500]]], dtype=np.int64),
        "decoder_text_input": _scalar(b"<s>", np.object_),
    }
    request, _ = parse_request(tensors, InputNames())
    assert request.image_sizes.tolist() == [[300, 500]]
    assert request.decoder_text == "<s>"
    assert parse_request(BASE, InputNames())[0].decoder_text == ""


def test_every_option_is_read_with_the_batch_dim_stripped() -> None:
    pixels = np.zeros((1, 2, 3, 336, 336), np.float16)
    tensors = {
        **BASE,
        "image_input": pixels,
        "stop_words": np.array([[b"END", b"", b"STOP"]], dtype=np.object_),
        "bad_words": np.array([[b"bad"]], dtype=np.object_),
        "temperature": _scalar(0.5, np.float32),
        "top_k": _scalar(20, np.int32),
        "top_p": _scalar(0.8, np.float32),
        "min_length": _scalar(2, np.int32),
        "random_seed": _scalar(2**63 + 5, np.uint64),
        "end_id": _scalar(-1, np.int32),
        "prompt_table_extra_id": _scalar(2**64 - 1, np.uint64),
        "stream": _scalar(True, np.bool_),
        "return_num_input_tokens": _scalar(True, np.bool_),
        "return_perf_metrics": _scalar(True, np.bool_),
    }
    request, flags = parse_request(tensors, InputNames("min_length", "random_seed"))
    assert request.images is not None and request.images.shape == (2, 3, 336, 336)
    assert request.stop_words == ("END", "STOP") and request.bad_words == ("bad",)
    assert (request.temperature, request.top_k, request.min_tokens) == (0.5, 20, 2)
    assert request.top_p == pytest.approx(0.8)
    assert request.seed == 2**63 + 5 and request.end_id == -1
    assert request.extra_id == 2**64 - 1
    assert flags == ReturnFlags(stream=True, num_input_tokens=True, perf_metrics=True)


def test_onevision_media_inputs() -> None:
    tensors = {
        **BASE,
        "image_bytes_input": np.zeros((1, 1, 10, 12, 3), np.uint8),
        "video_bytes_input": np.zeros((1, 4, 10, 12, 3), np.uint8),
        "prompt_table_extra_id": _scalar(0, np.uint64),
    }
    request, _ = parse_request(tensors, InputNames())
    assert request.images.shape == (1, 10, 12, 3) and request.video.shape == (4, 10, 12, 3)
    assert request.extra_id is None  # 0 is the uint64 default, not an id


@pytest.mark.parametrize(
    "tensors",
    [
        {"text_input": BASE["text_input"]},
        {**BASE, "max_tokens": np.array([[1], [2]], dtype=np.int32)},
        {**BASE, "top_k": np.array([[1, 2]], dtype=np.int32)},
    ],
)
def test_malformed_requests_are_invalid(tensors: dict[str, np.ndarray]) -> None:
    with pytest.raises(InvalidRequest):
        parse_request(tensors, InputNames())


def test_response_outputs_only_when_asked() -> None:
    stats = GenerationStats(16, input_tokens=600, output_tokens=5, reused_blocks=36)
    plain = response_outputs("hé", stats, ReturnFlags())
    assert list(plain) == ["text_output"]
    assert plain["text_output"].shape == (1, 1) and plain["text_output"][0, 0] == "hé".encode()
    full = response_outputs(
        "x", stats, ReturnFlags(num_input_tokens=True, num_output_tokens=True, perf_metrics=True)
    )
    assert {k: int(v[0, 0]) for k, v in full.items() if k != "text_output"} == {
        "num_input_tokens": 600,
        "num_output_tokens": 5,
        "kv_cache_reused_blocks": 36,
        "kv_cache_alloc_new_blocks": 2,
        "kv_cache_alloc_total_blocks": 38,
    }
    assert all(
        v.dtype == np.int32 and v.shape == (1, 1) for k, v in full.items() if k != "text_output"
    )


def test_log_prob_flags_reach_the_request_and_the_response() -> None:
    tensors = {
        **BASE,
        "return_log_probs": _scalar(True, np.bool_),
        "return_generation_logits": _scalar(True, np.bool_),
    }
    request, flags = parse_request(tensors, InputNames())
    assert request.return_log_probs and request.return_generation_logits
    assert flags.log_probs and flags.generation_logits
    plain, _ = parse_request(BASE, InputNames())
    assert not (plain.return_log_probs or plain.return_generation_logits)


def _steps(count: int, vocab: int = 5) -> list[Step]:
    return [
        Step(i, "", log_prob=-0.5 * i, cum_log_prob=-1.0 * i,
             logits=np.full(vocab, i, dtype=np.float32))
        for i in range(1, count + 1)
    ]  # fmt: skip


def test_score_outputs_lay_out_like_the_trt_llm_backend() -> None:
    both = ReturnFlags(log_probs=True, generation_logits=True)
    steps = _steps(3)
    # A streamed response: every log prob so far, its own token's logits.
    streamed = score_outputs(steps, both, new=1)
    assert streamed["cum_log_probs"].shape == (1, 1) and streamed["cum_log_probs"][0, 0] == -3.0
    assert streamed["output_log_probs"].tolist() == [[[-0.5, -1.0, -1.5]]]
    assert streamed["generation_logits"].shape == (1, 1, 1, 5)
    assert (streamed["generation_logits"] == 3.0).all()
    # The unstreamed response: all of them, [batch, beam, T(, vocab)].
    whole = score_outputs(steps, both, new=3)
    assert whole["output_log_probs"].shape == (1, 1, 3)
    assert whole["generation_logits"].shape == (1, 1, 3, 5)
    assert whole["generation_logits"][0, 0, :, 0].tolist() == [1.0, 2.0, 3.0]
    assert all(array.dtype == np.float32 for array in whole.values())
    assert set(score_outputs(steps, ReturnFlags(log_probs=True), new=1)) == {
        "cum_log_probs", "output_log_probs",
    }  # fmt: skip
    assert list(score_outputs(steps, ReturnFlags(generation_logits=True), new=1)) == [
        "generation_logits"
    ]
    assert score_outputs(steps, ReturnFlags(stream=True), new=1) == {}


def test_pb_helpers_use_the_backend_objects() -> None:
    tensor = SimpleNamespace(name=lambda: "max_tokens", as_numpy=lambda: BASE["max_tokens"])
    assert read_inputs(SimpleNamespace(inputs=lambda: [tensor])) == {
        "max_tokens": BASE["max_tokens"]
    }
    fake_pb = SimpleNamespace(Tensor=lambda name, array: (name, array.shape))
    assert to_pb_tensors(fake_pb, {"text_output": np.zeros((1, 1))}) == [("text_output", (1, 1))]
