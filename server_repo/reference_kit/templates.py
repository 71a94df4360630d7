"""Server-side prompt templates, as NVIDIA's multimodal preprocessing applies them.

The client sends only the question; the server wraps it (triton-contract.md section 5). Like
NVIDIA's preprocessing, the text before the visual features and the text after them are
tokenized separately (special tokens such as BOS only on the first segment), and the features of
every image/video are placed, in order, between the two. This module only builds token ids and
the mask of feature positions; computing the features is the architecture's job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class PromptTemplate:
    """``prefix`` + features + ``suffix.format(text=question)``."""

    prefix: str
    suffix: str

    def render(self, text: str, marker: str = "") -> str:
        """The prompt as one string, ``marker`` standing where the features go (for logs/docs)."""
        return self.prefix + marker + self.suffix.format(text=text)


LLAVA = PromptTemplate(prefix="USER:\n", suffix="{text} ASSISTANT:")
LLAVA_ONEVISION = PromptTemplate(
    prefix="<|im_start|>user ", suffix="\n{text}<|im_end|><|im_start|>assistant\n"
)


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
    head = tokenizer(template.prefix, add_special_tokens=True)["input_ids"]
    tail = tokenizer(template.suffix.format(text=text), add_special_tokens=False)["input_ids"]
    ids: list[int] = list(head)
    mask: list[bool] = [False] * len(head)
    for slot in slots:
        ids.extend([slot.token_id] * slot.length)
        mask.extend([True] * slot.length)
    ids.extend(tail)
    mask.extend([False] * len(tail))
    return Prompt(tuple(ids), tuple(mask))
