"""Guided decoding through the real tritonserver: the inputs declared, honoured and refused.

One model (LLaVA) carries the behaviour; the declarations are checked on every text model.
Answers are compared with the same request run in-process from the same tiny checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2_grpc

from server_repo.reference_kit import GenerationRequest, ReferenceEngine
from tests.server_repo.reference.triton_stream import one, stream, tensors, texts

LLAVA = "reference_llava"
REFERENCE = Path(__file__).parents[3] / "server_repo" / "reference"
SCHEMA = {
    "type": "object",
    "properties": {
        "kind": {"enum": ["cat", "dog"]},
        "legs": {"type": "integer", "minimum": 0, "maximum": 8},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
    },
    "required": ["kind", "legs", "tags"],
}
SAMPLING = {
    "temperature": one(1.0, np.float32),
    "top_k": one(40, np.int32),
    "random_seed": one(7, np.uint64),
}


def _guide(guide_type: str, guide: str | None = None) -> dict[str, np.ndarray]:
    found = {"guided_decoding_guide_type": one(guide_type.encode(), np.object_)}
    if guide is not None:
        found["guided_decoding_guide"] = one(guide.encode(), np.object_)
    return found


async def test_every_text_model_declares_the_guide_inputs(
    client: grpcclient.InferenceServerClient,
) -> None:
    # NVIDIA's llmapi model (reference_qwen2_5_vl's contract) declares no guide inputs.
    skipped = {"reference_qwen2_5_vl"}
    models = sorted(
        p.name for p in REFERENCE.iterdir() if "whisper" not in p.name and p.name not in skipped
    )
    assert len(models) == 17
    for model in models:
        config = (await client.get_model_config(model, as_json=True))["config"]
        declared = {item["name"]: item for item in config["input"]}
        for name in ("guided_decoding_guide_type", "guided_decoding_guide"):
            assert declared[name]["data_type"] == "TYPE_STRING", model
            assert declared[name]["dims"] == ["1"] and declared[name]["optional"] is True


async def test_a_json_schema_guide_is_honoured_streamed_and_not(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, llava_engine: ReferenceEngine
) -> None:
    request = tensors("Describe it.", 300, **SAMPLING, **_guide("json_schema", json.dumps(SCHEMA)))
    whole, error = await stream(stub, LLAVA, request)
    assert error is None and len(whole) == 2
    streamed, error = await stream(stub, LLAVA, {**request, "stream": one(True, np.bool_)})
    assert error is None
    text = texts(whole)[0]
    assert "".join(texts(streamed)) == text
    jsonschema.validate(json.loads(text), SCHEMA)
    local = llava_engine.complete(
        GenerationRequest(
            "Describe it.", 300, temperature=1.0, top_k=40, seed=7,
            guide_type="json_schema", guide=json.dumps(SCHEMA),
        )
    )  # fmt: skip
    assert local.text == text


async def test_an_uncompilable_guide_is_an_error_response(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    results, error = await stream(
        stub, LLAVA, tensors("Describe it.", 8, **_guide("json_schema", '{"type": "foo"}'))
    )
    assert results == [] and error is not None and "does not compile" in error


async def test_an_unknown_guide_type_is_ignored_as_trt_llm_ignores_it(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    plain, error = await stream(stub, LLAVA, tensors("Describe it.", 8, **SAMPLING))
    assert error is None
    unknown, error = await stream(
        stub, LLAVA, tensors("Describe it.", 8, **SAMPLING, **_guide("structural_tag", "{}"))
    )
    assert error is None and texts(unknown) == texts(plain)
