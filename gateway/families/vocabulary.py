"""A deployment's vocabulary: token ids -> the text each token decodes to on its own.

TensorRT-LLM's ensembles return no token ids, only each streamed token's text; the top-k
alternatives of OpenAI's ``top_logprobs`` come from ``generation_logits`` rows indexed by token
id, so naming them needs the engine's tokenizer. It is read from a Hugging Face
``tokenizer.json`` (the ``tokenizers`` library, already a dependency): the file, or the
checkpoint/tokenizer folder that holds it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer


class Vocabulary:
    """Token texts by id, decoded alone as TensorRT-LLM's postprocessing decodes a streamed
    token, and the log-softmax of a logits row with its most likely tokens."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self.size = tokenizer.get_vocab_size(with_added_tokens=True)
        self.text = functools.lru_cache(maxsize=65536)(self._decode)

    @classmethod
    def load(cls, path: Path) -> Vocabulary:
        """From ``tokenizer.json`` or a folder holding one; ``OSError`` when it cannot be read."""
        file = path / "tokenizer.json" if path.is_dir() else path
        try:
            return cls(Tokenizer.from_file(str(file)))
        except Exception as exc:  # tokenizers raises a bare Exception for a bad file
            raise OSError(f"cannot read a tokenizer from {file}: {exc}") from exc

    def _decode(self, token_id: int) -> str:
        return self._tokenizer.decode([token_id], skip_special_tokens=False)

    def count(self, text: str) -> int:
        """How many tokens ``text`` encodes to (no special tokens added; added tokens such as
        ``<think>`` count as one): a generated span's length when its token ids are unknown."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def top(self, logits: np.ndarray[Any, Any], count: int) -> tuple[tuple[str, float], ...]:
        """The ``count`` most likely tokens under ``log_softmax(logits)``, most likely first.

        The softmax runs over the whole row (an engine's padded vocabulary included, whose
        padding logits carry no mass worth naming); ids the tokenizer does not know are
        skipped, so they are never listed as text."""
        row = np.asarray(logits, dtype=np.float64).reshape(-1)
        peak = row.max()
        log_probs = row - (peak + np.log(np.exp(row - peak).sum()))
        known = log_probs[: self.size]
        take = min(count, known.size)
        if take <= 0:
            return ()
        ids = np.argpartition(-known, take - 1)[:take]
        ids = ids[np.argsort(-known[ids], kind="stable")]
        return tuple((self.text(int(i)), float(known[i])) for i in ids)
