"""What one served model can take: its family ∩ its served-model settings ∩ its Triton contract.

Built once, when the model's contract is read (``runtime.ServedRuntime.get_contract``), and
never changed after: the request path asks it (``pipeline/admission.admit``) instead of asking
the family, the settings and the contract each their part. The family itself stays as it was
constructed; what reading the contract taught (which inputs the deployment declares, which of
its contracts a family with several met) is recorded here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gateway.errors import InvalidRequest, TooManyMediaItems

if TYPE_CHECKING:  # base.py reads this module: Family's own view of a conversation
    from gateway.families.base import Conversation, Family

ContractKind = Literal["engine", "llmapi"]
# TensorRT-LLM's guided decoding inputs (triton_backend all_models/inflight_batcher_llm/
# tensorrt_llm/config.pbtxt); ``triton/tensors.py`` sends them under these names.
GUIDE_INPUTS = ("guided_decoding_guide_type", "guided_decoding_guide")


@dataclass(frozen=True)
class Capabilities:
    """What one served model takes, decided once at start-up."""

    model: str  # the served id, named in refusals
    family: str
    contract: ContractKind
    triton_model: str
    # Media the family takes (its tensor names; audio by flag).
    image_tensor: str | None
    video_tensor: str | None
    audio: bool
    # Whether the deployment declares the family's image tensor (None: the family takes none).
    image_tensor_declared: bool
    requires_image: bool
    requires_video: bool
    # The family's own image limit and the rule its refusal states (None: the engine decides),
    # then the served model's (the deployment's max_num_images).
    family_max_images: int | None
    family_image_rule: str
    engine_max_images: int | None
    # The image tensor's dims as the deployment declares them (None: not known, or none), and
    # the most images they carry (None: as many as the other limits allow):
    # ``Family.stacked_images_rank``.
    image_dims: tuple[int, ...] | None
    tensor_max_images: int | None
    max_videos: int
    max_audio_clips: int
    # Request features the deployment can honour.
    lora: bool  # declares lora_task_id
    guided_decoding: bool  # declares both guide inputs
    extra_id: bool  # the family's preprocessing takes prompt_table_extra_id and it is declared
    image_sizes: bool  # the family sends original sizes and the deployment declares them

    @classmethod
    def of(
        cls,
        model: str,
        family: Family,
        *,
        triton_model: str,
        contract: ContractKind,
        declares: Callable[[str], bool],
        engine_max_images: int | None,
        image_dims: tuple[int, ...] | None = None,
    ) -> Capabilities:
        """The capabilities of ``family`` served as ``model`` on a deployment that ``declares``
        the inputs it does (``ModelContract.declares``: aliases included) and its image tensor
        with ``image_dims`` (None: not read yet)."""
        image_tensor = family.image_tensor
        sizes = family.image_sizes_tensor
        rank = family.stacked_images_rank
        narrow = rank is not None and image_dims is not None and len(image_dims) + 1 < rank
        return cls(
            model=model,
            family=family.name,
            contract=contract,
            triton_model=triton_model,
            image_tensor=image_tensor,
            video_tensor=family.video_tensor,
            audio=family.accepts_audio,
            image_tensor_declared=image_tensor is not None and declares(image_tensor),
            requires_image=family.requires_image,
            requires_video=family.requires_video,
            family_max_images=family.image_limit(),
            family_image_rule=family.image_limit_rule(),
            engine_max_images=engine_max_images,
            image_dims=image_dims,
            tensor_max_images=1 if narrow else None,
            max_videos=family.max_videos,
            max_audio_clips=family.max_audio_clips,
            lora=declares("lora_task_id"),
            guided_decoding=all(declares(name) for name in GUIDE_INPUTS),
            extra_id=family.supports_extra_id and declares("prompt_table_extra_id"),
            image_sizes=sizes is not None and declares(sizes),
        )

    def takes(self, kind: Literal["image", "video", "audio"]) -> bool:
        """Whether the family takes media of ``kind`` at all."""
        if kind == "audio":
            return self.audio
        return (self.image_tensor if kind == "image" else self.video_tensor) is not None

    def image_limit_message(self, count: int) -> str:
        """The refusal for ``count`` images past the family's limit, saying why it exists."""
        return f"this request has {count} images; {self.family_image_rule}"


def admit_conversation(capabilities: Capabilities, conversation: Conversation) -> None:
    """Refuse a conversation the architecture cannot read, before any fetch: a required image
    or video missing, or more images than the family takes. A part of a kind the model does
    not take at all is left to the media check, which names it ("needs an image" would
    mislead)."""
    audios = sum(turn.audios for turn in conversation.turns)
    if (
        (conversation.image_count and not capabilities.takes("image"))
        or (conversation.video_count and not capabilities.takes("video"))
        or (audios and not capabilities.takes("audio"))
    ):
        return
    if capabilities.requires_video and conversation.video_count == 0:
        raise InvalidRequest(
            f"model family '{capabilities.family}' needs a video in the request",
            param="messages",
            code="video_required",
        )
    if capabilities.requires_image and conversation.image_count == 0:
        raise InvalidRequest(
            f"model family '{capabilities.family}' needs an image in the request: its encoder "
            "has nothing to read from a text-only conversation",
            param="messages",
            code="image_required",
        )
    limit = capabilities.family_max_images
    if limit is not None and conversation.image_count > limit:
        raise TooManyMediaItems(
            capabilities.image_limit_message(conversation.image_count), param="messages"
        )
