"""The independent oracle for the family architectures: transformers' own greedy ``generate``.

Each family's HF model gets the inputs its processor would hand it for the same request: the
kit's prompt ids (image placeholders where HF expects them) and the pixels in HF's layout. The
kit computes features and runs its own step loop (prefix cache, explicit positions,
cross-attention masks, encoder-decoder cache), so equal tokens check all of that against HF.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from server_repo.reference_kit import GenerationRequest, ReferenceEngine
from server_repo.reference_kit.archs import fuyu, mllama, qwen2_vl


def _float(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).float()


def _fuyu_inputs(engine: ReferenceEngine, request: GenerationRequest, ids: torch.Tensor) -> dict:
    """Fuyu's input ids hold ``|NEWLINE|`` at the end of each patch row; patches go apart."""
    patches, rows, cols = fuyu.patchify(request.images[0].astype(np.float32))
    ids = ids.clone()
    start = int(torch.nonzero(ids[0] == engine.model.config.image_token_id)[0, 0])
    for row in range(rows):
        ids[0, start + row * (cols + 1) + cols] = engine.assets.processor["newline_id"]
    return {"input_ids": ids, "image_patches": torch.from_numpy(patches)[None]}


def _mllama_inputs(engine: ReferenceEngine, request: GenerationRequest, ids: torch.Tensor) -> dict:
    prepared = engine.prepare(request)
    inputs = mllama.image_inputs(engine.assets.processor, request.images)
    token = engine.model.config.image_token_index
    mask = mllama.cross_attention_mask(prepared.prompt, token, prepared.features)
    return {
        "pixel_values": inputs["pixel_values"],
        "aspect_ratio_ids": inputs["aspect_ratio_ids"],
        "aspect_ratio_mask": inputs["aspect_ratio_mask"],
        "cross_attention_mask": torch.from_numpy(mask),
    }


def _pixel_inputs(engine: ReferenceEngine, request: GenerationRequest, ids: torch.Tensor) -> dict:
    """What each family's ``generate`` takes besides the prompt ids."""
    family, images = engine.arch.family, request.images
    if images is None:
        return {}
    if family in ("llava", "vila", "neva", "video_neva", "internlm_xcomposer2", "blip2_opt"):
        return {"pixel_values": _float(images)}
    if family in ("blip2_t5", "nougat"):
        return {"pixel_values": _float(images)}
    if family == "kosmos2":
        mask = torch.tensor([engine.prepare(request).prompt.media_mask]).long()
        return {"pixel_values": _float(images), "image_embeds_position_mask": mask}
    if family == "llava_next":
        sizes = torch.from_numpy(request.image_sizes)
        return {"pixel_values": _float(images)[None], "image_sizes": sizes}
    if family == "qwen2_vl":
        inputs = qwen2_vl.image_inputs(engine.assets.processor, images)
        token_types = (ids == engine.model.config.image_token_id).int()
        return {**inputs, "mm_token_type_ids": token_types}
    if family == "fuyu":
        return _fuyu_inputs(engine, request, ids)
    if family == "mllama":
        return _mllama_inputs(engine, request, ids)
    if family == "deplot":
        patches = _float(images)
        return {"flattened_patches": patches, "attention_mask": (patches.sum(-1) != 0).float()}
    raise KeyError(family)


def hf_greedy(engine: ReferenceEngine, request: GenerationRequest) -> list[int]:
    """HF ``generate(do_sample=False)`` token ids for ``request``, prompt stripped."""
    return hf_greedy_logits(engine, request)[0]


def hf_greedy_logits(
    engine: ReferenceEngine, request: GenerationRequest
) -> tuple[list[int], torch.Tensor]:
    """HF greedy token ids and the raw logits each was chosen from (``[steps, vocab]``, fp32),
    as ``generate(output_logits=True)`` returns them."""
    ids = torch.tensor([engine.prepare(request).prompt.token_ids])
    options: dict[str, Any] = {
        "max_new_tokens": request.max_tokens,
        "do_sample": False,
        "eos_token_id": engine.eos_token_id,
        "pad_token_id": engine.tokenizer.pad_token_id,
        "return_dict_in_generate": True,
        "output_logits": True,
    }
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    inputs.update(_pixel_inputs(engine, request, ids))
    if engine.arch.encoder_decoder:
        (start,) = engine.decoder_start(request)  # type: ignore[attr-defined]
        options["decoder_start_token_id"] = start
        if engine.arch.family != "blip2_t5":  # the encoder reads the image alone
            inputs = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
            if engine.arch.family == "deplot":
                inputs["attention_mask"] = (inputs["flattened_patches"].sum(-1) != 0).float()
    with torch.inference_mode():
        output = engine.model.generate(**inputs, **options)
    logits = torch.cat([step.float() for step in output.logits])
    if engine.arch.encoder_decoder:
        return output.sequences[0, 1:].tolist(), logits  # after the decoder start token
    return output.sequences[0, inputs["input_ids"].shape[1] :].tolist(), logits


def kit_greedy(engine: ReferenceEngine, request: GenerationRequest) -> list[int]:
    """The kit's greedy token ids (it stops at ``max_tokens`` or EOS, as HF does)."""
    ids = engine.complete(request).token_ids
    assert len(ids) == request.max_tokens or ids[-1] == engine.eos_token_id
    return ids
