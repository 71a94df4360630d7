"""A deployment's vocabulary: token texts by id, and the top alternatives of a logits row."""

from __future__ import annotations

import numpy as np
import pytest
from tokenizers import Tokenizer, models

from gateway.families.vocabulary import Vocabulary


@pytest.fixture
def vocabulary() -> Vocabulary:
    words = {"<unk>": 0, "a": 1, " b": 2, "c": 3}
    return Vocabulary(Tokenizer(models.WordLevel(words, unk_token="<unk>")))


def test_top_is_the_log_softmax_over_the_whole_row_naming_known_ids(
    vocabulary: Vocabulary,
) -> None:
    row = np.array([0.0, 2.0, 1.0, 3.0, 5.0], np.float32)  # id 4: engine padding
    log_probs = row - np.log(np.exp(row.astype(np.float64)).sum())
    top = vocabulary.top(row, 2)
    assert [name for name, _ in top] == ["c", "a"]  # id 4 is not named
    assert [value for _, value in top] == pytest.approx([log_probs[3], log_probs[1]])
    assert len(vocabulary.top(row, 50)) == 4 and vocabulary.top(row, 0) == ()


def test_texts_decode_one_token_alone_and_load_reads_a_folder(
    vocabulary: Vocabulary, tmp_path
) -> None:
    assert vocabulary.text(2) == " b"
    Tokenizer(models.WordLevel({"<unk>": 0, "z": 1}, unk_token="<unk>")).save(
        str(tmp_path / "tokenizer.json")
    )
    assert Vocabulary.load(tmp_path).text(1) == "z"
    with pytest.raises(OSError, match="cannot read"):
        Vocabulary.load(tmp_path / "missing")
