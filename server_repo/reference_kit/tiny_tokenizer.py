"""Build the tiny, deterministic tokenizer that the generated reference models ship with.

No tokenizer can be downloaded, so one is trained locally: a byte-level BPE over a small corpus
embedded below, with the alphabet restricted to printable ASCII (plus tab and newline) and
``<unk>`` for anything else. Every token therefore decodes to ASCII *on its own*, which makes
the ensemble's streaming contract exact here: the per-token deltas joined equal the text decoded
at once. The family's special tokens are added on top so templates and placeholders tokenize
as with the real checkpoints.

Training is deterministic (same corpus, same trainer settings -> same ``tokenizer.json``).
Saving and loading as a Hugging Face tokenizer is left to ``weights.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

DEFAULT_VOCAB_SIZE = 640
# Printable ASCII plus tab and newline: no control characters in generated text.
_ALPHABET_BYTES = (9, 10, *range(32, 127))

# A small, fixed English corpus: enough merges that prompts are not one byte per token.
_CORPUS = """\
What is in this image? Describe the picture in detail. What is shown in this video?
The quick brown fox jumps over the lazy dog. A cat sits on a red mat near the window.
There is a person riding a bicycle down the street, and a dog running beside them.
The image shows a mountain lake at sunset with trees along the shore and clouds above.
Please answer the question briefly. How many people are in the photo? What color is the car?
The video shows a man walking in a park; then he sits on a bench and reads a book.
Singapore, apples, bananas and oranges are on the table. The answer is yes, not no.
USER: hello! ASSISTANT: Hello, how can I help you today? Tell me a story about a robot.
user assistant system: you are a helpful assistant.
Numbers 0 1 2 3 4 5 6 7 8 9 10 42 100 2024; symbols ( ) [ ] { } < > / \\ - _ + = * & % $ # @ ~
"""


@dataclass(frozen=True)
class SpecialTokens:
    """The family's special tokens; ids are assigned in this order after the BPE vocabulary."""

    bos: str | None
    eos: str
    unk: str
    pad: str
    extra: tuple[str, ...]
    add_bos: bool

    @property
    def all(self) -> list[str]:
        ordered = [self.unk, self.bos, self.eos, self.pad, *self.extra]
        return [t for i, t in enumerate(ordered) if t is not None and t not in ordered[:i]]


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map that the ByteLevel pre-tokenizer uses."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def train_tokenizer(special: SpecialTokens, vocab_size: int = DEFAULT_VOCAB_SIZE) -> Tokenizer:
    """Train the ASCII byte-level BPE and register ``special`` as special tokens."""
    mapping = _bytes_to_unicode()
    tokenizer = Tokenizer(models.BPE(unk_token=special.unk))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=[special.unk],
        initial_alphabet=[mapping[b] for b in _ALPHABET_BYTES],
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS.splitlines(), trainer=trainer)
    tokenizer.add_special_tokens(special.all)
    if special.add_bos and special.bos is not None:
        bos_id = tokenizer.token_to_id(special.bos)
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{special.bos} $A",
            pair=f"{special.bos} $A {special.bos} $B",
            special_tokens=[(special.bos, bos_id)],
        )
    return tokenizer


def build_hf_tokenizer(special: SpecialTokens) -> PreTrainedTokenizerFast:
    """Wrap the trained tokenizer so ``save_pretrained`` writes a loadable HF tokenizer."""
    extra = [t for t in special.extra if t not in (special.bos, special.eos, special.pad)]
    return PreTrainedTokenizerFast(
        tokenizer_object=train_tokenizer(special),
        bos_token=special.bos,
        eos_token=special.eos,
        unk_token=special.unk,
        pad_token=special.pad,
        additional_special_tokens=extra,
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
    )
