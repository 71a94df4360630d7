"""The llmapi request parser and response values, without Triton (NVIDIA's helpers.py facts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from server_repo.reference_kit.llmapi_outputs import TextTracker, Timing, perf_outputs
from server_repo.reference_kit.llmapi_request import (
    DEFAULT_MAX_TOKENS,
    LlmapiError,
    content_key,
    parse_llmapi,
)
from server_repo.reference_kit.request import GenerationStats
from tests.server_repo.reference.llmapi_client import data_url
from tests.server_repo.samples import rgb_image


def tensors(**values: Any) -> dict[str, np.ndarray]:
    """Tensors as Triton hands them to the model: no batch dimension."""
    found = {"text_input": np.array([b"Hello"], dtype=np.object_)}
    for name, value in values.items():
        found[name] = np.array(value if isinstance(value, list) else [value])
    return found


def test_unset_sampling_is_greedy_with_the_llm_api_defaults() -> None:
    request, options = parse_llmapi(tensors())
    assert request.text_input == "Hello" and request.greedy
    assert request.max_tokens == DEFAULT_MAX_TOKENS
    assert not options.exclude_input and not options.streaming and not options.finish_reason


def test_sampling_params_map_to_the_request() -> None:
    request, options = parse_llmapi(
        tensors(
            sampling_param_temperature=np.float32(0.5),
            sampling_param_seed=np.uint64(2**64 - 1),
            sampling_param_stop=[b"\n", b"END"],
            sampling_param_max_tokens=np.int32(5),
            return_cumulative_logprob=True,
        )
    )
    assert not request.greedy and request.temperature == 0.5 and request.top_p == 1.0
    assert request.seed == 2**64 - 1 and request.max_tokens == 5
    assert request.stop_words == options.stop_strings == ("\n", "END")
    assert request.return_log_probs and options.cumulative_logprob


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"sampling_param_max_tokens": [1, 2]}, "Expected a scalar tensor for tensor"),
        ({"sampling_param_best_of": np.int32(2)}, "one sequence per request"),
        ({"image_url": [b"https://a.example/x.png"]}, "only data URLs are accepted"),
        ({"image_url": [b"/etc/passwd"]}, "Unsupported image_url '/etc/passwd'"),
        ({"image_url": [b"data:image/png,raw"]}, "Only base64 data URLs"),
        ({"image_url": [b"data:image/png;base64,AAAA"]}, "cannot decode image_url"),
        ({"lora_id": np.uint64(1)}, "must all be provided together"),
    ],
)
def test_what_is_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(LlmapiError, match=message):
        parse_llmapi(tensors(**values))


def test_lora_is_checked_as_nvidia_checks_it_then_refused(tmp_path: Path) -> None:
    lora = {"lora_id": np.uint64(3), "lora_name": b"a", "lora_path": str(tmp_path).encode()}
    with pytest.raises(LlmapiError, match="lora_ckpt_source must be one of"):
        parse_llmapi(tensors(**lora, lora_ckpt_source=b"bogus"))
    with pytest.raises(LlmapiError, match="does not exist"):
        parse_llmapi(tensors(**{**lora, "lora_path": b"/no/such/adapter"}))
    with pytest.raises(LlmapiError, match="not supported by this reference"):
        parse_llmapi(tensors(**lora))


def test_images_decode_in_order_and_key_the_prefix_cache_by_content() -> None:
    first, second = rgb_image(1)[0], rgb_image(2)[0]
    request, _ = parse_llmapi(tensors(image_url=[data_url(first), data_url(second)]))
    assert len(request.pictures) == 2
    assert np.array_equal(request.pictures[0], first)
    assert request.extra_id == content_key([first, second]) != content_key([second, first])


def test_a_multi_token_stop_string_is_held_back_then_cut_off() -> None:
    def decode(ids: list[int]) -> str:
        return "".join(chr(ord("a") + i) for i in ids)

    tracker = TextTracker(decode, [("cd", [2, 3])], prefix=">")
    for token in (0, 1, 2):
        tracker.add(token)
    assert tracker.visible() == ">ab"  # "c" may begin the stop string
    tracker.add(3)
    assert tracker.final("stop_word") == ">ab" and tracker.stop_reason == "cd"
    other = TextTracker(decode, [("cd", [2, 3])])
    for token in (2, 4):
        other.add(token)
    assert other.visible() == "ce" and other.final("length") == "ce"
    assert other.stop_reason is None


def test_perf_outputs_count_prompt_blocks() -> None:
    stats = GenerationStats(16, input_tokens=40, output_tokens=10, reused_blocks=2)
    outputs = perf_outputs(stats, Timing(1, 2, 3, 4))
    assert outputs["kv_cache_reused_block"].tolist() == [b"2"]
    assert outputs["kv_cache_missed_block"].tolist() == [b"1"]  # 3 prompt blocks
    assert outputs["kv_cache_alloc_total_blocks"].tolist() == [b"4"]
    assert outputs["kv_cache_alloc_new_blocks"].tolist() == [b"2"]
    assert float(outputs["kv_cache_hit_rate"][0]) == pytest.approx(2 / 3)
    assert outputs["arrival_time_ns"].tolist() == [b"1"]
    # As NVIDIA's model.py sends them: BYTES, whatever config.pbtxt declares.
    assert all(array.dtype == np.object_ for array in outputs.values())
