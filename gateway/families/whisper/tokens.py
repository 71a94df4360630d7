"""Whisper's tokenizer: a tiktoken rank table with Whisper's special tokens appended.

OpenAI's Whisper (and TensorRT-LLM's Whisper, which loads the same ``multilingual.tiktoken``)
numbers its special tokens right after the ordinary vocabulary, in a fixed order:
``<|endoftext|>``, ``<|startoftranscript|>``, one token per language (99; 100 since large-v3,
which added Cantonese), ``<|translate|>``, ``<|transcribe|>``, ``<|startoflm|>``,
``<|startofprev|>``, ``<|nospeech|>``, ``<|notimestamps|>``, then 1501 timestamps
``<|0.00|>`` .. ``<|30.00|>`` in 20 ms steps. Building the same table here lets the gateway
write decoder prompts as token ids and read timestamps out of ``output_ids``.

Vocabularies (``WhisperOptions.vocabulary``):

- ``"multilingual"``: ``multilingual.tiktoken`` from the installed ``openai-whisper`` package,
  located without importing it (importing it would import torch);
- a path to a ``.tiktoken`` rank file (the one NVIDIA's guide copies into ``whisper_bls/1/``);
- ``"bytes"``: the 256 single-byte tokens and no merges, what the tiny reference models ship
  (their weights are tiny, so their vocabulary is too; the special tokens keep the real order).
"""

from __future__ import annotations

import base64
import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import tiktoken

__all__ = [
    "LANGUAGES",
    "TIME_PRECISION",
    "WhisperTokenizer",
    "language_code",
    "load_tokenizer",
]

TIME_PRECISION = 0.02  # seconds per timestamp step
TIMESTAMP_COUNT = 1501  # <|0.00|> .. <|30.00|>
# GPT-2's pre-tokenizer pattern, which Whisper's encodings use.
_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# Language code -> name, in Whisper's token order (the order fixes the token ids).
LANGUAGES: dict[str, str] = {
    "en": "english", "zh": "chinese", "de": "german", "es": "spanish", "ru": "russian",
    "ko": "korean", "fr": "french", "ja": "japanese", "pt": "portuguese", "tr": "turkish",
    "pl": "polish", "ca": "catalan", "nl": "dutch", "ar": "arabic", "sv": "swedish",
    "it": "italian", "id": "indonesian", "hi": "hindi", "fi": "finnish", "vi": "vietnamese",
    "he": "hebrew", "uk": "ukrainian", "el": "greek", "ms": "malay", "cs": "czech",
    "ro": "romanian", "da": "danish", "hu": "hungarian", "ta": "tamil", "no": "norwegian",
    "th": "thai", "ur": "urdu", "hr": "croatian", "bg": "bulgarian", "lt": "lithuanian",
    "la": "latin", "mi": "maori", "ml": "malayalam", "cy": "welsh", "sk": "slovak",
    "te": "telugu", "fa": "persian", "lv": "latvian", "bn": "bengali", "sr": "serbian",
    "az": "azerbaijani", "sl": "slovenian", "kn": "kannada", "et": "estonian", "mk": "macedonian",
    "br": "breton", "eu": "basque", "is": "icelandic", "hy": "armenian", "ne": "nepali",
    "mn": "mongolian", "bs": "bosnian", "kk": "kazakh", "sq": "albanian", "sw": "swahili",
    "gl": "galician", "mr": "marathi", "pa": "punjabi", "si": "sinhala", "km": "khmer",
    "sn": "shona", "yo": "yoruba", "so": "somali", "af": "afrikaans", "oc": "occitan",
    "ka": "georgian", "be": "belarusian", "tg": "tajik", "sd": "sindhi", "gu": "gujarati",
    "am": "amharic", "yi": "yiddish", "lo": "lao", "uz": "uzbek", "fo": "faroese",
    "ht": "haitian creole", "ps": "pashto", "tk": "turkmen", "nn": "nynorsk", "mt": "maltese",
    "sa": "sanskrit", "lb": "luxembourgish", "my": "myanmar", "bo": "tibetan", "tl": "tagalog",
    "mg": "malagasy", "as": "assamese", "tt": "tatar", "haw": "hawaiian", "ln": "lingala",
    "ha": "hausa", "ba": "bashkir", "jw": "javanese", "su": "sundanese", "yue": "cantonese",
}  # fmt: skip
_ALIASES = {
    "burmese": "my", "valencian": "ca", "flemish": "nl", "haitian": "ht",
    "letzeburgesch": "lb", "pushto": "ps", "panjabi": "pa", "moldavian": "ro",
    "moldovan": "ro", "sinhalese": "si", "castilian": "es", "mandarin": "zh",
}  # fmt: skip
_BY_NAME = {name: code for code, name in LANGUAGES.items()} | _ALIASES


def language_code(value: str) -> str | None:
    """An ISO-639-1 code (``en``) or an English name (``English``) -> Whisper's code."""
    key = value.strip().lower().replace("_", "-")
    if key in LANGUAGES:
        return key
    return _BY_NAME.get(key) or (key.split("-")[0] if key.split("-")[0] in LANGUAGES else None)


def special_tokens(num_languages: int) -> list[str]:
    """Whisper's special tokens in id order."""
    return [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *(f"<|{code}|>" for code in list(LANGUAGES)[:num_languages]),
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
        *(f"<|{i * TIME_PRECISION:.2f}|>" for i in range(TIMESTAMP_COUNT)),
    ]


@dataclass(frozen=True)
class WhisperTokenizer:
    """Ids of the structural tokens, and text <-> ids for ordinary text."""

    encoding: tiktoken.Encoding
    languages: tuple[str, ...]

    @property
    def eot(self) -> int:
        return self.encoding.n_vocab - len(special_tokens(len(self.languages)))

    def special(self, token: str) -> int:
        return self.encoding.encode_single_token(token)

    @property
    def sot(self) -> int:
        return self.eot + 1

    @property
    def no_timestamps(self) -> int:
        return self.special("<|notimestamps|>")

    @property
    def timestamp_begin(self) -> int:
        return self.no_timestamps + 1

    def language_token(self, code: str) -> int:
        if code not in self.languages:
            raise KeyError(f"language {code!r} is not in this model's vocabulary")
        return self.sot + 1 + self.languages.index(code)

    def language_of(self, token: int) -> str | None:
        """The language code a token stands for, if it is a language token."""
        index = token - self.sot - 1
        return self.languages[index] if 0 <= index < len(self.languages) else None

    def is_timestamp(self, token: int) -> bool:
        return self.timestamp_begin <= token < self.timestamp_begin + TIMESTAMP_COUNT

    def seconds(self, token: int) -> float:
        """The time a timestamp token marks, relative to its window."""
        return round((token - self.timestamp_begin) * TIME_PRECISION, 2)

    def encode(self, text: str) -> list[int]:
        """Ordinary text only: a user's ``<|en|>`` stays text, never becomes a special token."""
        return self.encoding.encode_ordinary(text)

    def token_bytes(self, token: int) -> bytes:
        """The bytes a text token stands for; b"" for special tokens."""
        return b"" if token >= self.eot else self.encoding.decode_single_token_bytes(token)

    def decode(self, tokens: list[int]) -> str:
        """The text of ``tokens``, special tokens (timestamps included) left out."""
        data = b"".join(self.token_bytes(t) for t in tokens)
        return data.decode("utf-8", errors="replace")


def _byte_ranks() -> dict[bytes, int]:
    """The 256 single bytes, in GPT-2's byte order (printable ones first)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    order = printable + [b for b in range(256) if b not in printable]
    return {bytes([b]): rank for rank, b in enumerate(order)}


def _read_ranks(path: Path) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    with path.open() as handle:
        for line in handle:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    return ranks


def multilingual_ranks_path() -> Path:
    """``multilingual.tiktoken`` inside the installed ``openai-whisper``, found, not imported."""
    spec = importlib.util.find_spec("whisper")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / "assets" / "multilingual.tiktoken"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        "the 'multilingual' Whisper vocabulary needs multilingual.tiktoken: pip install "
        "openai-whisper, or set the model's whisper.vocabulary to the file's path"
    )


@lru_cache(maxsize=8)
def load_tokenizer(vocabulary: str, num_languages: int) -> WhisperTokenizer:
    """The tokenizer for a vocabulary name or rank-file path (cached: the real one is 50k ranks)."""
    if vocabulary == "bytes":
        ranks, name = _byte_ranks(), "whisper-bytes"
    else:
        path = multilingual_ranks_path() if vocabulary == "multilingual" else Path(vocabulary)
        if not path.is_file():
            raise FileNotFoundError(f"Whisper vocabulary file not found: {path}")
        ranks, name = _read_ranks(path), path.name
    specials = special_tokens(num_languages)
    encoding = tiktoken.Encoding(
        name=name,
        explicit_n_vocab=len(ranks) + len(specials),
        pat_str=_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={token: len(ranks) + i for i, token in enumerate(specials)},
    )
    return WhisperTokenizer(encoding, tuple(LANGUAGES)[:num_languages])
