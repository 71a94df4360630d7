"""The ``<think>``-tag reasoning formats: the same split whatever the pieces, no tag leaked."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.families.reasoning import REASONING_PARSERS, ReasoningFormat
from gateway.families.reasoning.deepseek_r1 import DEEPSEEK_R1
from gateway.families.reasoning.qwen3 import QWEN3

# (format, whole output, reasoning, answer): what vLLM's parsers of the same names give
# (except a qwen3 block cut before </think>: reasoning here, streamed or not; see qwen3.py).
CASES = [
    (DEEPSEEK_R1, "Let me think.</think>\n\nIt is 4.", "Let me think.", "\n\nIt is 4."),
    (DEEPSEEK_R1, "<think>Let me think.</think>4", "Let me think.", "4"),
    (DEEPSEEK_R1, "\n<think>a < b</think>", "a < b", ""),
    (DEEPSEEK_R1, "still thinking when cut", "still thinking when cut", ""),
    (DEEPSEEK_R1, "x</think>y</think>z<think>w", "x", "y</think>z<think>w"),
    (DEEPSEEK_R1, "</thin", "</thin", ""),
    (QWEN3, "<think>\nHmm.\n</think>\n\nParis.", "\nHmm.\n", "\n\nParis."),
    (QWEN3, "  <think>a</think>b", "a", "b"),
    (QWEN3, "Paris, no thinking.", "", "Paris, no thinking."),
    (QWEN3, "Answer <think>not reasoning</think>", "", "Answer <think>not reasoning</think>"),
    (QWEN3, "<think>cut before the end", "cut before the end", ""),
    (QWEN3, "<thin", "", "<thin"),
    (QWEN3, "  ", "", "  "),
    (QWEN3, "<think></think>", "", ""),
    (QWEN3, "", "", ""),
]  # fmt: skip


def split_pieces(form: ReasoningFormat, pieces: list[str]) -> tuple[str, str, int]:
    """The reasoning, the answer and the raw characters given to the reasoning."""
    splitter = form.splitter()
    reasoning, content, raw = [], [], 0
    for piece in [*map(splitter.feed, pieces), splitter.close()]:
        assert not (piece.reasoning and "".join(content)), "reasoning after the answer began"
        reasoning.append(piece.reasoning)
        content.append(piece.content)
        raw += piece.reasoning_raw
    return "".join(reasoning), "".join(content), raw


@pytest.mark.parametrize(("form", "output", "reasoning", "content"), CASES)
def test_whole_output(form: ReasoningFormat, output: str, reasoning: str, content: str) -> None:
    got_reasoning, got_content, raw = split_pieces(form, [output])
    assert (got_reasoning, got_content) == (reasoning, content)
    assert raw == len(output) - len(content)  # everything before the answer is reasoning's


@pytest.mark.parametrize(("form", "output", "reasoning", "content"), CASES)
def test_every_cut_and_every_character(
    form: ReasoningFormat, output: str, reasoning: str, content: str
) -> None:
    """Cut anywhere (a tag split in two), or fed a character at a time: the same split."""
    for cut in range(len(output) + 1):
        pieces = [output[:cut], output[cut:]]
        assert split_pieces(form, pieces)[:2] == (reasoning, content), pieces
    assert split_pieces(form, list(output))[:2] == (reasoning, content)


@given(
    st.sampled_from([DEEPSEEK_R1, QWEN3]),
    st.lists(st.sampled_from(["<think>", "</think>", "<", "/", "think", ">", "a", " ", "\n"])),
    st.data(),
)
def test_any_pieces_give_the_whole_outputs_split(
    form: ReasoningFormat, words: list[str], data: st.DataObject
) -> None:
    output = "".join(words)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(output)), max_size=8)))
    pieces = [output[a:b] for a, b in zip([0, *cuts], [*cuts, len(output)], strict=True)]
    assert split_pieces(form, pieces) == split_pieces(form, [output])


def test_a_tag_is_never_let_out_while_it_may_be_one() -> None:
    """Text that may start a tag is held, never sent and then taken back."""
    splitter = DEEPSEEK_R1.splitter()
    assert splitter.feed("reason </th").reasoning == "reason "
    assert splitter.feed("in").reasoning == ""
    piece = splitter.feed("k>answer")
    assert (piece.reasoning, piece.content) == ("", "answer")
    assert splitter.feed(" more").content == " more"  # the answer passes straight through
    qwen = QWEN3.splitter()
    assert qwen.feed("<thi") == ("", "", 0)  # undecided: nothing out
    assert qwen.feed("nk>r").reasoning == "r"


def test_the_parsers_are_named_as_vllm_names_them() -> None:
    assert sorted(REASONING_PARSERS) == ["deepseek_r1", "qwen3"]
    assert REASONING_PARSERS["deepseek_r1"].starts_in_reasoning
    assert not REASONING_PARSERS["qwen3"].starts_in_reasoning
