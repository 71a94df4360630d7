"""What a model family is: a tensor path, a prompt renderer and a pixel spec, nothing more.

A family knows how one conversation becomes the ``text_input`` string the Triton
deployment expects (given what NVIDIA's server-side preprocessing already adds), and how
decoded images become the image tensor its deployment declares. It knows nothing of
HTTP, fetching or gRPC: everything here is pure and synchronous so the pipeline can run
the pixel work in worker threads and tests can check it without a server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from PIL import Image
from pydantic import BaseModel

from gateway.errors import InvalidRequest
from gateway.families._pixels import PixelSpec, fitted_to_side, preprocess, resize_to_fit
from gateway.families.calls import GenerationRequest, Plan, Sampling, Task
from gateway.families.capabilities import Capabilities, admit_conversation

if TYPE_CHECKING:
    from gateway.families.tool_formats.base import ToolCall, ToolFormat

# "tool": a tool's result (OpenAI's ``tool`` and legacy ``function`` roles); a family's tool
# format lowers it (``tool_formats/``) before ``render`` sees the conversation.
Role = Literal["system", "user", "assistant", "tool"]
# ``image_url``: NVIDIA's llmapi model, one data: URI per image (``families/llmapi.py``).
ImageTensorName = Literal["image_input", "image_bytes_input", "image_url"]
# Video goes as raw frames (``video_bytes_input``) or, for Video-NeVA, as preprocessed frames
# in ``image_input`` (the encoder treats frames as images).
VideoTensorName = Literal["video_bytes_input", "image_input"]
# NVIDIA's multimodal preprocessing (tensorrtllm_backend all_models/inflight_batcher_llm/
# preprocessing, then TensorRT-LLM triton_backend/all_models from v0.20): the release that
# first serves a model type (its supported list in v0.13.0, v0.15.0, v0.16.0, v0.19.0).
NVIDIA_PREPROCESSING = "NVIDIA's Triton multimodal preprocessing (tensorrtllm_backend {since} on)"
# The inputs of TensorRT-LLM's text contract, without which no text family can be served.
TEXT_CONTRACT_INPUTS = ("text_input", "max_tokens")
# NVIDIA's preprocessing (tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/
# model.py @c2e65b88d85255be30cf50440a91662abeb497dd, ``VisionPreProcessor``) flattens a
# request's ``image_bytes_input`` images into one list and pairs image i with query i: a second
# image of one request has no query (IndexError for mllama and qwen2_vl) or fails the batch-size
# assert (llava_onevision), inside Triton. The families it serves this way take one image.
ONE_RAW_IMAGE = (
    "NVIDIA's Triton preprocessing for this family reads one image_bytes_input image per "
    "request (a second one fails inside Triton)"
)


SpeechFinder = Callable[[np.ndarray[Any, Any]], Sequence[tuple[int, int]]]


@dataclass(frozen=True)
class SpeechOptions:
    """What an audio endpoint asks of a speech family (a chat request passes none)."""

    task: Task = "transcribe"
    language: str | None = None  # None: the model guesses
    prompt: str | None = None  # previous text, for context
    timestamps: bool = False
    max_tokens: int | None = None  # None: the whole clip
    # VAD chunking: where a voice-activity detector hears speech in a stretch of the clip
    # ([start, end) sample spans within it). Asked only where long audio needs a cut.
    find_speech: SpeechFinder | None = None


@dataclass(frozen=True)
class Turn:
    """One message, flattened: its text and how many images, videos and audio clips it
    carried (in order)."""

    role: Role
    text: str
    images: int = 0
    videos: int = 0
    audios: int = 0
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant turn's calls
    tool_call_id: str | None = None  # a tool turn: the call it answers


@dataclass(frozen=True)
class Conversation:
    """The chat, normalised: system text first (if any), then alternating turns."""

    system: str | None
    turns: tuple[Turn, ...]

    @property
    def image_count(self) -> int:
        return sum(t.images for t in self.turns)

    @property
    def video_count(self) -> int:
        return sum(t.videos for t in self.turns)


class Family:
    """Base class: override the class attributes and ``render``; pixels are optional.

    A family takes video when it names ``video_tensor`` and audio when ``accepts_audio``;
    parts of a kind it does not take are refused before any fetch. ``plan`` turns the
    pipeline's draft of a request into the Triton calls to make: one call on the text contract
    for a vision-language family; a speech family overrides it.
    """

    name: ClassVar[str]
    image_tensor: ClassVar[ImageTensorName | None] = None
    # The (width, height) images are resized towards, if fixed: large JPEGs are then decoded
    # at a reduced scale (draft mode). None: always decode at full size.
    image_decode_size: ClassVar[tuple[int, int] | None] = None
    # The Hugging Face pixel recipe of a family whose image tensor holds one preprocessed array
    # per image: ``prepare_image`` follows it, and so can a device (``[decode] device``,
    # ``families/_pixels_torch.py``). None: the family prepares its images itself.
    pixel_spec: ClassVar[PixelSpec | None] = None
    video_tensor: ClassVar[VideoTensorName | None] = None
    # Frames are downscaled (never up) so their shorter side is at most this; None: as stored.
    video_max_short_side: ClassVar[int | None] = None
    accepts_audio: ClassVar[bool] = False
    # Whether a plain text prompt (legacy completions) is something this family completes.
    completes_text: ClassVar[bool] = True
    features_per_image: ClassVar[int | None] = None
    default_end_id: ClassVar[int | None] = None
    default_pad_id: ClassVar[int | None] = None
    stop_strings: ClassVar[tuple[str, ...]] = ()
    # Strings the server tokenizer turns into structure (image slots, turn markers). User
    # text carrying them could forge turns or desynchronise image features: refused.
    reserved_markers: ClassVar[tuple[str, ...]] = ()
    # Inputs the Triton model must declare to serve this family (read at start-up).
    required_inputs: ClassVar[tuple[str, ...]] = TEXT_CONTRACT_INPUTS
    # What the architecture can take, checked before any fetch (``check_conversation``):
    # an encoder whose output is the decoder's only context needs an image (or a video);
    # ``max_images`` is the most the model handles in one request (None: the engine decides,
    # through ``ServedModel.max_images``).
    requires_image: ClassVar[bool] = False
    requires_video: ClassVar[bool] = False
    max_images: ClassVar[int | None] = None
    # Why ``max_images`` is what it is, said in the refusal (a server-side limit, not a choice).
    image_limit_reason: ClassVar[str | None] = None
    # The rank of ``stack_images``' tensor (batch axis first) where its axis 1 counts the
    # request's images: [1, n, 3, H, W] is 5 (``_pixels.to_fp16_batch``). A deployment that
    # declares the image tensor with fewer axes carries one image (``triton/tensors.fit_rank``
    # drops that axis only when it is 1): ``Capabilities.tensor_max_images``. None: no axis
    # of the tensor counts images (one image's tiles, or no image tensor).
    stacked_images_rank: ClassVar[int | None] = None
    # Videos and audio clips one request can carry: a video tensor is [1, frames, ...] (its
    # second axis holds frames, not videos), and a speech encoder takes one clip.
    max_videos: ClassVar[int] = 1
    max_audio_clips: ClassVar[int] = 1
    # prompt_table_extra_id: whether the deployment's preprocessing accepts the KV-reuse key.
    supports_extra_id: ClassVar[bool] = True
    # LoRA adapters (lora_task_id / lora_weights / lora_config) on this family's engines.
    supports_lora: ClassVar[bool] = False
    # Whether rendering this family's prompt honours a reasoning effort (a chat template's
    # ``enable_thinking`` switch): then ``reasoning_effort`` / Responses ``reasoning.effort``
    # reach it as ``GenerationRequest.reasoning_effort`` (pipeline/reasoning.checked_effort);
    # otherwise they are refused. The gateway's own renderings (the engine path) have none.
    reasoning_switch: ClassVar[bool] = False
    # Encoder-decoder engines: the decoder's prompt (``decoder_text_input``), sent only when the
    # deployment declares that input; None leaves the decoder start to the server.
    decoder_prompt: ClassVar[str | None] = None
    # The name the deployment gives the original image sizes, for families whose encoder
    # output depends on them (LLaVA-NeXT unpadding, Phi-3-vision crops); sent when declared.
    image_sizes_tensor: ClassVar[str | None] = None
    # The Triton server side NVIDIA ships for this family (docs/families.md): where and since
    # which release its preprocessing serves it; None where NVIDIA ships none, and then what
    # the deployment must provide itself (``deployment_must_provide``). Shown in /v1/models
    # and logged at start-up.
    nvidia_server_side: ClassVar[str | None] = None
    deployment_must_provide: ClassVar[str] = ""
    # How this family's checkpoints write tools, calls and results (``tool_formats/``);
    # None: a request with tools is refused.
    tool_format: ClassVar[ToolFormat | None] = None
    # ``detail: "low"``: images are first downscaled to fit this side, so the processor picks
    # its smallest anyres canvas (OneVision: one tile; LLaVA-NeXT: two). None: the family has
    # one resolution and ``detail`` changes nothing (docs/families.md, "Image detail").
    low_detail_side: ClassVar[int | None] = None

    def __init__(self, options: BaseModel | None = None) -> None:
        if options is not None:
            raise ValueError(f"model family '{self.name}' takes no options table")

    def render(self, conversation: Conversation) -> str:
        """The ``text_input`` for this conversation."""
        raise NotImplementedError

    def engine_images(self, max_images: int | None) -> Family:
        """This family for a deployment whose ``max_num_images`` is ``max_images`` (the served
        model's ``max_images``): itself, or, for a family whose server-side prompt depends on
        it (VILA), a new instance configured so. As ``bound``: the instance it is called on
        is never changed, so served models sharing one family cannot reconfigure each other."""
        return self

    def bound(self, declared: frozenset[str], model_name: str) -> Family:
        """This family as served by a deployment declaring ``declared``: itself, or, for a
        family with several contracts, a new instance holding the one it met. Called once
        the deployment's inputs are known (the text contract's were checked already); the
        instance it is called on is never changed (``families/capabilities.py``)."""
        return self

    def server_side(self) -> str:
        """One line on the server side this family relies on, for /v1/models and the log."""
        if self.nvidia_server_side:
            return self.nvidia_server_side
        must = self.deployment_must_provide
        return f"no NVIDIA Triton server side; the deployment provides {must}"

    def check_deployment(self, parameters: Mapping[str, str], model_name: str) -> None:
        """Called once the deployment's config parameters are known: refuse a deployment that
        cannot serve this family correctly (``UpstreamUnavailable``, saying why)."""

    def check_speech(self, speech: SpeechOptions, sampling: Sampling) -> SpeechOptions:
        """Whether this family takes an audio endpoint's job; a speech family resolves it."""
        raise InvalidRequest(
            f"this model (family '{self.name}') does not transcribe audio",
            param="model",
            code="invalid_model",
        )

    def plan(
        self,
        draft: GenerationRequest,
        audio: np.ndarray[Any, Any] | None = None,
        speech: SpeechOptions | None = None,
    ) -> Plan:
        """The Triton calls for one request: here, ``draft`` itself on the text contract."""
        if speech is not None:
            self.check_speech(speech, draft.sampling)
        return Plan((draft,))

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        """One decoded RGB image -> the per-image array this family's tensor holds: by
        default ``pixel_spec``'s values, in fp16 (the wire type of ``image_input``)."""
        if self.pixel_spec is None:
            raise InvalidRequest(f"model family '{self.name}' does not accept images")
        return preprocess(image, self.pixel_spec, np.float16)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        """Per-image arrays -> the wire tensor, batch dimension first."""
        raise InvalidRequest(f"model family '{self.name}' does not accept images")

    def processing_options(self) -> str:
        """A stable description of the pixel processing, folded into the content digest."""
        return f"{self.name}:{self.image_tensor}"

    def detail_key(self, detail: str | None) -> str:
        """What ``detail`` does to the pixels here, for the content digest: "low" where it
        downscales, "" where it changes nothing (so every detail shares one KV-reuse id)."""
        return "low" if detail == "low" and self.low_detail_side is not None else ""

    def image_for_detail(self, image: Image.Image, detail: str | None) -> Image.Image:
        """The decoded image as ``detail`` asks: "low" fits ``low_detail_side`` where the
        family has a choice of resolution; "high", "auto" and "original" take the family's
        full resolution (its largest anyres canvas), as does every detail elsewhere."""
        side = self.low_detail_side
        if self.detail_key(detail) != "low" or side is None:
            return image
        return resize_to_fit(image, side)

    def detail_size(self, height: int, width: int, detail: str | None) -> tuple[int, int]:
        """The (height, width) ``image_for_detail`` gives an image of this size."""
        side = self.low_detail_side
        if self.detail_key(detail) != "low" or side is None:
            return height, width
        fitted_width, fitted_height = fitted_to_side(width, height, side)
        return fitted_height, fitted_width

    def image_tokens(self, sizes: Sequence[tuple[int, int]]) -> int | None:
        """Prompt positions the images take (their visual features), from each image's
        (height, width) as the family prepared it; None where the family cannot say."""
        if self.features_per_image is None:
            return None
        return self.features_per_image * len(sizes)

    def video_tokens(self, frames: int) -> int | None:
        """Prompt positions one video of ``frames`` sampled frames takes; None: unknown."""
        return None

    def prepare_video(self, frames: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Sampled uint8 frames [n, H, W, 3] -> the per-video array this family sends."""
        raise InvalidRequest(f"model family '{self.name}' does not accept video")

    def stack_video(self, video: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """One prepared video -> the wire tensor, batch dimension first."""
        raise InvalidRequest(f"model family '{self.name}' does not accept video")

    def video_processing_options(self) -> str:
        """A stable description of the frame processing, folded into the content digest."""
        return f"{self.name}:{self.video_tensor}:short_side={self.video_max_short_side}"

    def check_conversation(self, conversation: Conversation) -> None:
        """Refuse what the architecture cannot do, before any fetch, with a 400 that says why:
        what every family's capabilities decide (``admit_conversation``), then this family's
        own rules. A served model's request meets the same two through ``pipeline/admission``."""
        admit_conversation(self.capabilities(), conversation)
        self.conversation_rules(conversation)

    def conversation_rules(self, conversation: Conversation) -> None:
        """What this family alone refuses in a conversation (a template's rule, say)."""

    def capabilities(self) -> Capabilities:
        """This family's own capabilities, as if its deployment declared every input it uses
        and the engine set no image limit (a served model's: ``ServedRuntime.capabilities``)."""
        return Capabilities.of(
            self.name,
            self,
            triton_model="",
            contract="engine",
            declares=lambda _: True,
            engine_max_images=None,
        )

    def image_limit(self) -> int | None:
        """The most images one request may carry for this family (None: the engine decides)."""
        return self.max_images

    def image_limit_message(self, count: int) -> str:
        """The refusal for ``count`` images, naming the family's limit and why it exists."""
        return f"this request has {count} images; {self.image_limit_rule()}"

    def image_limit_rule(self) -> str:
        """The family's image limit and why it exists, as a refusal states it."""
        rule = f"model family '{self.name}' takes at most {self.image_limit()} per request"
        return f"{rule}: {self.image_limit_reason}" if self.image_limit_reason else rule

    def image_sizes(self, sizes: Sequence[tuple[int, int]]) -> np.ndarray[Any, Any] | None:
        """Original (height, width) per image -> the sizes tensor [1, n, 2], if the family
        has one (``image_sizes_tensor``)."""
        if self.image_sizes_tensor is None:
            return None
        return np.asarray(sizes, dtype=np.int64).reshape(1, len(sizes), 2)

    def check_text(self, conversation: Conversation) -> None:
        """Refuse user-supplied text that contains the family's structural markers."""
        texts = [conversation.system or ""] + [t.text for t in conversation.turns]
        for marker in self.reserved_markers:
            if any(marker in text for text in texts):
                raise InvalidRequest(
                    f"message text may not contain the reserved marker {marker!r}",
                    param="messages",
                    code="reserved_marker",
                )


def require_final_user_turn(conversation: Conversation) -> None:
    """Families whose server appends the assistant header need a user turn (or a tool's
    result) last."""
    if not conversation.turns or conversation.turns[-1].role not in ("user", "tool"):
        raise InvalidRequest(
            "the last message must have role 'user' for this model", param="messages"
        )


def max_multimodal_len(max_batch_size: int, features_per_image: int, max_images: int) -> int:
    """TRT-LLM engine rule: max_multimodal_len = max_batch_size x features x max_images."""
    if min(max_batch_size, features_per_image, max_images) < 1:
        raise ValueError("max_batch_size, features_per_image and max_images must be >= 1")
    return max_batch_size * features_per_image * max_images
