"""Server-side prompt templates, as NVIDIA's multimodal preprocessing applies them.

The client sends only the question; the server wraps it (triton-contract.md section 5). Like
NVIDIA's preprocessing (tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/
model.py @c2e65b88d85255be30cf50440a91662abeb497dd, ``_create_request``), a template with a
post-prompt (``post``) tokenizes each segment on its own, each with the tokenizer's special
tokens: the pre-prompt, the question, the post-prompt (LLaVA: BOS before all three), with the
features of every image/video placed, in order, after the pre-prompt (OneVision: then a
tokenized ``\\n``). Templates without one keep the processor-style layout below. This module
only builds token ids and the mask of feature positions; computing the features is the
architecture's job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class PromptTemplate:
    """``prefix`` + features + ``suffix.format(text=question)``.

    ``media_open``/``media_close`` wrap each media item (Qwen2-VL's ``<|vision_start|>`` ..
    ``<|vision_end|>``). ``media_first`` is TensorRT-LLM's layout for prompts without a
    post-prompt (BLIP2, Fuyu, Nougat, Deplot): every feature first, then the text, tokenized
    without added special tokens (the template spells out the ones it needs).
    """

    prefix: str
    suffix: str
    media_open: str = ""
    media_close: str = ""
    media_first: bool = False
    # NVIDIA's segmented layout (``suffix`` unused): prefix | media | after_media | text | post,
    # each text segment tokenized separately with special tokens.
    post: str | None = None
    after_media: str = ""

    def render(self, text: str, marker: str = "") -> str:
        """The prompt as one string, ``marker`` standing where the features go (for logs/docs)."""
        media = self.media_open + marker + self.media_close if marker else ""
        if self.post is not None:
            return self.prefix + media + self.after_media + text + self.post
        if self.media_first:
            return media + self.prefix + self.suffix.format(text=text)
        return self.prefix + media + self.suffix.format(text=text)


LLAVA = PromptTemplate(prefix="USER:\n", suffix="", post=" ASSISTANT:")
LLAVA_ONEVISION = PromptTemplate(
    prefix="<|im_start|>user ",
    suffix="",
    after_media="\n",
    post="<|im_end|><|im_start|>assistant\n",
)
# BLIP2: the 32 query features, then the text as tokenized with special tokens (OPT's BOS is
# ``</s>`` in front; T5 appends ``</s>``).
BLIP2_OPT = PromptTemplate(prefix="", suffix="</s>{text}", media_first=True)
BLIP2_T5 = PromptTemplate(prefix="", suffix="{text}</s>", media_first=True)
# NVIDIA's runner for the Mistral LLaVA-NeXT checkpoint.
LLAVA_NEXT = PromptTemplate(prefix="[INST] ", suffix="\n{text} [/INST]")
# Mllama: nothing added but BOS; ``<|image|>`` in the text marks where cross-attention starts.
MLLAMA = PromptTemplate(prefix="", suffix="{text}")
# Qwen2-VL's chat template with one user turn, as NVIDIA's preprocessing applies it.
QWEN2_VL = PromptTemplate(
    prefix="<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n",
    suffix="{text}<|im_end|>\n<|im_start|>assistant\n",
    media_open="<|vision_start|>",
    media_close="<|vision_end|>",
)
# Kosmos-2's processor: BOS, ``<image>``, 64 features, ``</image>``, then the text.
KOSMOS2 = PromptTemplate(prefix="<image>", suffix="</image>{text}")
# Fuyu's processor: patches (rows ended by ``|NEWLINE|``), BOS, text, ``<0x04>`` (answer start).
FUYU = PromptTemplate(prefix="", suffix="<s>{text}<0x04>", media_first=True)
# Nougat and Deplot: the encoder reads only the image; the text is not used.
NO_PROMPT = PromptTemplate(prefix="", suffix="", media_first=True)


@dataclass(frozen=True)
class MediaSlot:
    """``length`` feature positions, filled with placeholder ``token_id`` (its KV-key stand-in)."""

    token_id: int
    length: int


@dataclass(frozen=True)
class Prompt:
    """Token ids of the whole prompt and which positions carry visual features."""

    token_ids: tuple[int, ...]
    media_mask: tuple[bool, ...]

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def media_tokens(self) -> int:
        return sum(self.media_mask)


def build_prompt(
    tokenizer: PreTrainedTokenizerBase,
    template: PromptTemplate,
    text: str,
    slots: Sequence[MediaSlot] = (),
) -> Prompt:
    """Tokenize ``template`` around ``text`` and splice in one placeholder run per media item."""
    ids: list[int] = []
    mask: list[bool] = []

    def add(tokens: Sequence[int], media: bool = False) -> None:
        ids.extend(tokens)
        mask.extend([media] * len(tokens))

    def encode(piece: str, special: bool = False) -> list[int]:
        return list(tokenizer(piece, add_special_tokens=special)["input_ids"]) if piece else []

    opening, closing = encode(template.media_open), encode(template.media_close)
    if template.post is not None:
        return _segmented(tokenizer, template, text, slots)
    if not template.media_first:
        add(tokenizer(template.prefix, add_special_tokens=True)["input_ids"])
    for slot in slots:
        add(opening)
        add([slot.token_id] * slot.length, media=True)
        add(closing)
    if template.media_first:
        add(encode(template.prefix + template.suffix.format(text=text)))
    else:
        add(encode(template.suffix.format(text=text)))
    return Prompt(tuple(ids), tuple(mask))


def _segmented(
    tokenizer: PreTrainedTokenizerBase,
    template: PromptTemplate,
    text: str,
    slots: Sequence[MediaSlot],
) -> Prompt:
    """NVIDIA's ``_create_request``: every segment tokenized alone, special tokens included."""
    assert template.post is not None

    def encode(piece: str) -> list[int]:
        return list(tokenizer(piece, add_special_tokens=True)["input_ids"])

    ids: list[int] = []
    mask: list[bool] = []
    pieces: list[tuple[Sequence[int], bool]] = [(encode(template.prefix), False)]
    pieces += [([slot.token_id] * slot.length, True) for slot in slots]
    if template.after_media:  # OneVision's "\n" after its visual tokens
        pieces.append((encode(template.after_media), False))
    pieces += [(encode(text), False), (encode(template.post), False)]
    for tokens, media in pieces:
        ids.extend(tokens)
        mask.extend([media] * len(tokens))
    return Prompt(tuple(ids), tuple(mask))
