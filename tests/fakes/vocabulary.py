"""A tokenizer for the fake Triton's scripted tokens, as a deployment's ``tokenizer.json``.

The fake engine answers the script's tokens whatever it is asked; a request for
``top_logprobs`` needs the engine's tokenizer to name the ids of ``generation_logits``. This
word-level vocabulary holds the default script's tokens (id = position), so a logits row over
it names them back; written once per process into a temporary folder, removed at its exit.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from tokenizers import Tokenizer, models

WORDS = ("The", " fake", " engine", " answers", " in", " tokens", ".", " a", " an", "<unk>")


def token_id(word: str) -> int:
    return WORDS.index(word)


@functools.cache
def tokenizer_file() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="fake-vocabulary-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # not one folder per process left
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder
