"""The gateway's Whisper tokenizer against OpenAI's (``openai-whisper``, the dev extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.families.whisper.tokens import (
    LANGUAGES,
    language_code,
    load_tokenizer,
    multilingual_ranks_path,
)

openai_tokenizer = pytest.importorskip("whisper.tokenizer")


@pytest.mark.parametrize("num_languages", [99, 100])
def test_multilingual_ids_match_openai(num_languages: int) -> None:
    ours = load_tokenizer("multilingual", num_languages)
    theirs = openai_tokenizer.get_tokenizer(True, num_languages=num_languages)
    assert ours.eot == theirs.eot and ours.sot == theirs.sot
    assert ours.no_timestamps == theirs.no_timestamps
    assert ours.timestamp_begin == theirs.timestamp_begin
    assert ours.special("<|translate|>") == theirs.translate
    assert ours.special("<|startofprev|>") == theirs.sot_prev
    for code in ("en", "de", "su", "haw"):
        assert ours.language_token(code) == theirs.to_language_token(code)
    text = " Hello world, Grüße aus Köln. 你好 <|en|>"
    assert ours.encode(text) == theirs.encoding.encode(text, disallowed_special=())
    assert ours.decode(ours.encode(text)) == text
    assert ours.encoding.n_vocab == theirs.encoding.n_vocab


def test_language_list_is_openais() -> None:
    assert LANGUAGES == openai_tokenizer.LANGUAGES
    assert language_code("English") == language_code("en") == language_code("en-US") == "en"
    assert language_code("Mandarin") == "zh" and language_code("klingon") is None


def test_timestamps_and_specials_decode_to_nothing() -> None:
    tokenizer = load_tokenizer("bytes", 99)
    begin = tokenizer.timestamp_begin
    assert tokenizer.is_timestamp(begin) and tokenizer.seconds(begin + 150) == 3.0
    assert not tokenizer.is_timestamp(tokenizer.no_timestamps)
    assert tokenizer.seconds(begin + 1500) == 30.0 and not tokenizer.is_timestamp(begin + 1501)
    ids = [tokenizer.sot, *tokenizer.encode("ok"), begin + 3, tokenizer.eot]
    assert tokenizer.decode(ids) == "ok"
    assert tokenizer.language_of(tokenizer.language_token("fr")) == "fr"
    assert tokenizer.language_of(tokenizer.sot) is None


def test_a_rank_file_path_works_and_a_missing_one_is_named(tmp_path: Path) -> None:
    source = multilingual_ranks_path()
    copy = tmp_path / "multilingual.tiktoken"
    copy.write_bytes(source.read_bytes())
    assert load_tokenizer(str(copy), 99).eot == 50257
    with pytest.raises(FileNotFoundError, match=r"nowhere\.tiktoken"):
        load_tokenizer(str(tmp_path / "nowhere.tiktoken"), 99)
