"""Can this model take this request? Every refusal of that kind, in one place, before any fetch.

``admit`` reads the served model's ``Capabilities`` (its family ∩ its settings ∩ the Triton
contract it met, ``families/capabilities.py``) and the request's media parts, conversation
and LoRA choice; chat, Responses (through chat), completions and NVIDIA's llmapi path call it
before they fetch a byte or build a tensor. What it admits, ``triton/tensors.py`` then only
asserts: a refusal there would come after the media were fetched and decoded, and would be a
gateway bug, not the client's fault.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway.config import MediaSettings
from gateway.errors import InvalidRequest, TooManyMediaItems
from gateway.families.base import Conversation
from gateway.families.capabilities import Capabilities, admit_conversation
from gateway.pipeline.conversation import MediaKind, MediaPart

__all__ = ["admit"]

_COUNT_LIMITS: dict[MediaKind, str] = {
    "image": "max_images_per_request",
    "video": "max_videos_per_request",
    "audio": "max_audio_per_request",
}
_PLURAL = {"image": "images", "video": "videos", "audio": "audio clips"}


def admit(
    capabilities: Capabilities,
    parts: Sequence[MediaPart],
    limits: MediaSettings,
    *,
    conversation: Conversation | None = None,
    rules: Callable[[Conversation], None] | None = None,
    lora: bool = False,
) -> None:
    """Refuse, with a 400 that says why, what this model cannot take: media of a kind it does
    not take, mixed kinds, more items than its family, its tensors, its engine or this server
    allow, a conversation its architecture cannot read (``rules``: the family's own, e.g. a
    chat template's), images or a LoRA adapter its deployment declares no input for."""
    _admit_kinds(capabilities, parts)
    _admit_family_images(capabilities, parts)  # before the conversation's count: names the part
    if conversation is not None:
        admit_conversation(capabilities, conversation)
        if rules is not None:
            rules(conversation)
    kinds = dict.fromkeys(part.kind for part in parts)
    for kind in kinds:
        count = sum(1 for part in parts if part.kind == kind)
        _admit_carried(capabilities, kind, count)
        _admit_count(capabilities, kind, count, limits)
    if "image" in kinds and not capabilities.image_tensor_declared:
        _refuse_images(capabilities)
    if lora and not capabilities.lora:
        raise InvalidRequest(
            "this model's Triton deployment declares no 'lora_task_id' input: it cannot "
            "apply LoRA adapters",
            code="lora_not_supported",
        )


def _refuse_images(capabilities: Capabilities) -> None:
    """Images to a deployment that declares no input for them (each contract its words)."""
    name = capabilities.image_tensor
    if capabilities.contract == "llmapi":  # as ``triton/llmapi.require`` words it
        raise InvalidRequest(
            f"model '{capabilities.model}' (NVIDIA's llmapi Triton model "
            f"{capabilities.triton_model!r}) declares no {name!r} input: it cannot take "
            "'messages'",
            param="messages",
            code="unsupported_parameter",
        )
    raise InvalidRequest(
        f"this model's Triton deployment declares no {name!r} input: it cannot take images",
        code="images_not_supported",
    )


def _admit_kinds(capabilities: Capabilities, parts: Sequence[MediaPart]) -> None:
    """Kinds the model does not take, and mixes the wire cannot carry."""
    model = capabilities.model
    for part in parts:
        if not capabilities.takes(part.kind):
            raise InvalidRequest(
                (f"model '{model}' does not accept {part.kind} input (", part.where, ")"),
                param=part.where,
                code="unsupported_content_part",
            )
    kinds = {part.kind for part in parts}
    if len(kinds) > 1:  # GenerationRequest carries one media tensor per request today
        raise InvalidRequest(
            f"model '{model}' takes one kind of media per request; this one mixes "
            f"{' and '.join(sorted(kinds))}",
            param="messages",
            code="unsupported_content_part",
        )


def _admit_family_images(capabilities: Capabilities, parts: Sequence[MediaPart]) -> None:
    """Images past the family's own limit, naming the first part over it and why the limit
    exists (NVIDIA's preprocessing reads one raw image per request for some families)."""
    limit = capabilities.family_max_images
    images = [part for part in parts if part.kind == "image"]
    if limit is None or len(images) <= limit:
        return
    first_over = images[limit].where
    raise TooManyMediaItems(
        (
            first_over,
            f" is image {limit + 1} of this request; "
            f"{capabilities.image_limit_message(len(images))}",
        ),
        param=first_over,
    )


def _admit_tensor_images(capabilities: Capabilities, count: int) -> None:
    """More images than the deployment's image tensor has an axis for (its declared dims)."""
    most = capabilities.tensor_max_images
    if most is None or count <= most:
        return
    dims = list(capabilities.image_dims or ())
    raise TooManyMediaItems(
        f"this request has {count} images; model '{capabilities.model}' takes one per "
        f"request: its Triton deployment declares {capabilities.image_tensor!r} with dims "
        f"{dims}, which carries one image's pixels",
        param="messages",
    )


def _admit_carried(capabilities: Capabilities, kind: MediaKind, count: int) -> None:
    """More videos or audio clips than the family's tensors can carry, saying why."""
    if kind == "image":
        _admit_tensor_images(capabilities, count)  # the family's: above; the engine's: below
        return
    carried = capabilities.max_videos if kind == "video" else capabilities.max_audio_clips
    if count <= carried:
        return
    noun = "video" if kind == "video" else "audio clip"
    most = f"one {noun}" if carried == 1 else f"at most {carried} {_PLURAL[kind]}"
    why = (
        f"its video tensor ({capabilities.video_tensor}) carries the frames of {most}"
        if kind == "video"
        else f"its speech encoder takes {most}"
    )
    raise TooManyMediaItems(
        f"this request has {count} {_PLURAL[kind]}; model '{capabilities.model}' takes "
        f"{most} per request: {why}",
        param="messages",
    )


def _admit_count(
    capabilities: Capabilities, kind: MediaKind, count: int, limits: MediaSettings
) -> None:
    """More items than this server allows per request, or images past the engine's limit."""
    limit: int = getattr(limits, _COUNT_LIMITS[kind])
    if kind == "image" and capabilities.engine_max_images is not None:
        limit = min(limit, capabilities.engine_max_images)
    if count > limit:
        raise TooManyMediaItems(
            f"this request has {count} {_PLURAL[kind]}; model '{capabilities.model}' accepts "
            f"at most {limit} per request",
            param="messages",
        )
