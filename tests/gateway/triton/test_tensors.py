import numpy as np
import pytest
from tritonclient.grpc.aio import InferInput

from gateway.errors import InvalidRequest
from gateway.families.calls import GenerationRequest, Guide, Sampling
from gateway.triton.client import request_message
from gateway.triton.contract import parse_model_config
from gateway.triton.tensors import build_inputs, fit_rank


def contract(*extra: tuple[str, str, list[int]]):
    names = [
        ("text_input", "TYPE_STRING", [1]),
        ("max_tokens", "TYPE_INT32", [1]),
        ("temperature", "TYPE_FP32", [1]),
        ("random_seed", "TYPE_UINT64", [1]),
        ("stop_words", "TYPE_STRING", [-1]),
        ("stream", "TYPE_BOOL", [1]),
        ("prompt_table_extra_id", "TYPE_UINT64", [1]),
        *extra,
    ]
    return parse_model_config(
        {
            "name": "m",
            "max_batch_size": 4,
            "input": [{"name": n, "data_type": t, "dims": d} for n, t, d in names],
        }
    )


def by_name(inputs) -> dict:
    return {i.name(): i for i in inputs}


def test_only_declared_inputs_are_sent_with_batch_dimension() -> None:
    request = GenerationRequest(
        text_input="hi",
        max_tokens=5,
        sampling=Sampling(temperature=0.5, top_p=0.9, seed=42),  # top_p not declared: left out
        stop_words=("\n", "END"),
        prompt_table_extra_id=2**63 + 5,
    )
    inputs = by_name(build_inputs(request, contract()))
    assert set(inputs) == {
        "text_input",
        "max_tokens",
        "temperature",
        "random_seed",
        "stop_words",
        "stream",
        "prompt_table_extra_id",
    }
    assert inputs["max_tokens"].shape() == [1, 1]
    assert inputs["max_tokens"].datatype() == "INT32"
    assert inputs["random_seed"].datatype() == "UINT64"
    assert inputs["stop_words"].shape() == [1, 2]
    assert inputs["text_input"].datatype() == "BYTES"
    assert inputs["prompt_table_extra_id"].datatype() == "UINT64"


def test_image_tensor_uses_declared_dtype_and_rank() -> None:
    images = np.zeros((1, 2, 3, 336, 336), dtype=np.float16)
    request = GenerationRequest(text_input="x", max_tokens=1, images=("image_input", images))
    inputs = by_name(
        build_inputs(request, contract(("image_input", "TYPE_FP16", [-1, -1, -1, -1])))
    )
    assert inputs["image_input"].shape() == [1, 2, 3, 336, 336]
    assert inputs["image_input"].datatype() == "FP16"


def test_encoder_decoder_prompt_only_when_declared() -> None:
    request = GenerationRequest(text_input="", max_tokens=4, decoder_text_input="<s>")
    assert "decoder_text_input" not in by_name(build_inputs(request, contract()))
    declared = contract(("decoder_text_input", "TYPE_STRING", [1]))
    sent = by_name(build_inputs(request, declared))["decoder_text_input"]
    assert sent.datatype() == "BYTES" and sent.shape() == [1, 1]


def test_arrays_take_the_declared_dtype_and_rank() -> None:
    patches = np.zeros((1, 1, 2048, 770), dtype=np.float16)  # Pix2Struct: [B, images, P, D]
    bf16 = contract(("image_input", "TYPE_BF16", [-1, -1, -1, -1]))
    request = GenerationRequest(text_input="", max_tokens=1, images=("image_input", patches))
    sent = by_name(build_inputs(request, bf16))["image_input"]
    assert sent.datatype() == "BF16" and sent.shape() == [1, 1, 1, 2048, 770]


def test_image_sizes_go_only_to_a_model_that_declares_them() -> None:
    sizes = np.array([[[480, 640]]], dtype=np.int64)
    request = GenerationRequest(
        text_input="x", max_tokens=1, image_sizes=("image_sizes_input", sizes)
    )
    assert "image_sizes_input" not in by_name(build_inputs(request, contract()))
    declared = contract(("image_sizes_input", "TYPE_INT32", [2]))
    sent = by_name(build_inputs(request, declared))["image_sizes_input"]
    assert sent.shape() == [1, 2] and sent.datatype() == "INT32"


def lora_contract():
    return contract(
        ("lora_task_id", "TYPE_UINT64", [1]),
        ("lora_weights", "TYPE_FP16", [-1, -1]),
        ("lora_config", "TYPE_INT32", [-1, 3]),
    )


def test_lora_weights_and_config_with_the_first_use_then_the_id_alone() -> None:
    weights = np.ones((1, 6, 16), dtype=np.float16)
    config = np.zeros((1, 6, 3), dtype=np.int32)
    first = GenerationRequest(
        text_input="x", max_tokens=1, lora_task_id=3, lora_weights=weights, lora_config=config
    )
    sent = by_name(build_inputs(first, lora_contract()))
    assert sent["lora_task_id"].datatype() == "UINT64" and sent["lora_task_id"].shape() == [1, 1]
    assert sent["lora_weights"].shape() == [1, 6, 16] and sent["lora_weights"].datatype() == "FP16"
    assert sent["lora_config"].shape() == [1, 6, 3] and sent["lora_config"].datatype() == "INT32"
    later = by_name(build_inputs(GenerationRequest("x", 1, lora_task_id=3), lora_contract()))
    assert "lora_task_id" in later and "lora_weights" not in later and "lora_config" not in later


def test_fit_rank_adds_and_drops_single_axes_after_the_batch_axis() -> None:
    assert fit_rank(np.zeros((1, 5)), 3).shape == (1, 1, 5)
    assert fit_rank(np.zeros((1, 1, 2)), 2).shape == (1, 2)
    with pytest.raises(ValueError, match="cannot fit"):
        fit_rank(np.zeros((1, 3, 2)), 2)


def test_old_ensemble_image_dims_take_one_image_and_refuse_two() -> None:
    old = contract(("image_input", "TYPE_FP16", [3, -1, -1]))  # v0.19's multimodal ensemble
    one = np.zeros((1, 1, 3, 336, 336), dtype=np.float16)
    sent = by_name(build_inputs(GenerationRequest("x", 1, images=("image_input", one)), old))
    assert sent["image_input"].shape() == [1, 3, 336, 336]
    two = np.zeros((1, 2, 3, 336, 336), dtype=np.float16)
    with pytest.raises(InvalidRequest, match="one image per request") as info:
        build_inputs(GenerationRequest("x", 1, images=("image_input", two)), old)
    assert info.value.status_code == 400


def test_repeated_scalars_share_one_tensor_and_distinct_values_do_not() -> None:
    first = by_name(
        build_inputs(GenerationRequest("a", 5, sampling=Sampling(temperature=0.5)), contract())
    )
    second = by_name(
        build_inputs(GenerationRequest("b", 5, sampling=Sampling(temperature=0.7)), contract())
    )
    assert first["max_tokens"] is second["max_tokens"]  # built once, read-only when sent
    assert first["stream"] is second["stream"]
    assert first["temperature"] is not second["temperature"]
    assert first["text_input"] is not second["text_input"]
    temperatures = [t["temperature"]._get_content() for t in (first, second)]
    assert temperatures == [np.float32(v).tobytes() for v in (0.5, 0.7)]


def test_fresh_values_are_not_cached_and_repeating_ones_are() -> None:
    """A sampled request's seed and an image's KV-reuse id are new on every request: cached,
    they would push the repeating scalars (max_tokens, flags) out of the shared cache."""
    from gateway.triton.tensors import _scalar_tensor

    def request(seed: int, extra_id: int) -> GenerationRequest:
        sampling = Sampling(temperature=0.7, seed=seed)
        return GenerationRequest("hi", 9, sampling=sampling, prompt_table_extra_id=extra_id)

    model = contract()
    first = by_name(build_inputs(request(1, 11), model))
    cached = _scalar_tensor.cache_info().currsize
    for i in range(50):
        again = by_name(build_inputs(request(1000 + i, 2000 + i), model))
        assert again["max_tokens"] is first["max_tokens"]  # shared
        assert again["random_seed"] is not first["random_seed"]
    assert _scalar_tensor.cache_info().currsize == cached
    last = again["random_seed"]._raw_content  # the value sent is the request's own
    assert np.frombuffer(last, np.uint64)[0] == 1049
    assert np.frombuffer(again["prompt_table_extra_id"]._raw_content, np.uint64)[0] == 2049


@pytest.mark.parametrize("text", ["", "USER: hi", "naïve 漢字 🙂\n\x00 end"])
def test_tensors_made_from_wire_bytes_serialise_as_tritonclients_own(text: str) -> None:
    """The per-request tensors are built from their wire bytes; the request Triton receives
    is byte for byte the one tritonclient builds from numpy arrays."""
    extra = [("decoder_text_input", "TYPE_STRING", [1]), ("seed", "TYPE_UINT64", [1])]
    extra += [("guided_decoding_guide_type", "TYPE_STRING", [1])]
    extra += [("guided_decoding_guide", "TYPE_STRING", [1])]
    model = contract(*extra)
    request = GenerationRequest(
        text_input=text, max_tokens=3, decoder_text_input=text + "!",
        sampling=Sampling(temperature=0.5, seed=2**64 - 1), prompt_table_extra_id=2**63 + 1,
        guide=Guide("regex", text or "a+"),
    )  # fmt: skip

    def by_numpy(tensor: InferInput) -> InferInput:
        name, datatype = tensor.name(), tensor.datatype()
        value = by_name(build_inputs(request, model))[name]
        if datatype == "BYTES":
            expected = {
                "text_input": text,
                "decoder_text_input": text + "!",
                "guided_decoding_guide_type": "regex",
                "guided_decoding_guide": text or "a+",
            }.get(name)
            if expected is None:
                return value
            array = np.array([[expected.encode("utf-8")]], dtype=np.object_)
        elif name == "random_seed":
            array = np.array([[2**64 - 1]], dtype=np.uint64)
        elif name == "prompt_table_extra_id":
            array = np.array([[2**63 + 1]], dtype=np.uint64)
        else:
            return value
        rebuilt = InferInput(name, [1, 1], datatype)
        rebuilt.set_data_from_numpy(array)
        return rebuilt

    ours = build_inputs(request, model)
    theirs = [by_numpy(tensor) for tensor in ours]
    assert [t.name() for t in ours] == [t.name() for t in theirs]
    mine = request_message("m", ours, "r1", ()).SerializeToString()
    assert mine == request_message("m", theirs, "r1", ()).SerializeToString()
