"""``with_reasoning`` over a relay: events in order, tokens aligned with the side that wrote
them, reasoning tokens counted three ways."""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import Tokenizer, models, pre_tokenizers

from gateway.families.calls import Outcome, TokenLogprob
from gateway.families.events import Done, ReasoningDelta, Relay, RelayEvent, TextDelta
from gateway.families.reasoning import REASONING_PARSERS
from gateway.families.vocabulary import Vocabulary
from gateway.pipeline.reasoning import ReasoningOutput, with_reasoning
from gateway.protocol.common import UsageCounts

R1 = REASONING_PARSERS["deepseek_r1"]
QWEN3 = REASONING_PARSERS["qwen3"]


async def relay_of(pieces: Sequence[str], scored: bool, completion: int) -> Relay:
    for piece in pieces:
        tokens = (TokenLogprob(piece, -1.0, ()),) if scored else None
        yield TextDelta(piece, 0, tokens)
    yield Done(Outcome("stop", UsageCounts(3, completion)))


async def split(
    pieces: Sequence[str], output: ReasoningOutput, scored: bool = False, completion: int = 0
) -> list[RelayEvent]:
    """The events of ``pieces`` split; the outcome's completion tokens: one per piece unless
    ``completion`` says otherwise."""
    relay = relay_of(pieces, scored, completion or len(pieces))
    return [event async for event in with_reasoning(relay, output)]


def reasoning_tokens(events: list[RelayEvent]) -> int | None:
    done = events[-1]
    assert isinstance(done, Done)
    return done.outcome.usage.reasoning_tokens


async def test_reasoning_then_content_and_one_token_per_piece_without_a_tokenizer() -> None:
    events = await split(["<think>", "a", " b</th", "ink>", "c"], ReasoningOutput(QWEN3))
    assert events[:-1] == [
        ReasoningDelta("a", 0, None),
        ReasoningDelta(" b", 0, None),
        TextDelta("c", 0, None),
    ]
    assert reasoning_tokens(events) == 4  # the pieces that began, held or ended the reasoning


async def test_the_tokenizer_counts_the_span_tags_included() -> None:
    words = {"<think>": 0, "</think>": 1, "one": 2, "two": 3, "three": 4, "[UNK]": 5}
    tokenizer = Tokenizer(models.WordLevel(words, unk_token="[UNK]"))
    tokenizer.add_special_tokens(["<think>", "</think>"])
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    count = Vocabulary(tokenizer).count
    pieces = ["one two", " three</think>", "one"]
    events = await split(pieces, ReasoningOutput(R1, count), completion=5)
    assert reasoning_tokens(events) == 4  # one two three </think>


async def test_tokens_go_with_the_side_that_wrote_them() -> None:
    """A tag cut over two tokens: both are the reasoning's; the answer's start its own."""
    pieces = ["think", "ing</th", "ink>ans", "wer"]
    events = await split(pieces, ReasoningOutput(R1), scored=True)
    sides: dict[type, list[str]] = {ReasoningDelta: [], TextDelta: []}
    for event in events[:-1]:
        assert isinstance(event, ReasoningDelta | TextDelta) and event.tokens is not None
        sides[type(event)] += [token.token for token in event.tokens]
    assert sides[ReasoningDelta] == ["think", "ing</th", "ink>ans"]  # "ink>ans" starts inside
    assert sides[TextDelta] == ["wer"]
    assert reasoning_tokens(events) == 3
    texts = [(type(e).__name__, e.text) for e in events[:-1] if isinstance(e, TextDelta)]
    assert "".join(text for _, text in texts) == "answer"


async def test_never_more_reasoning_tokens_than_completion_tokens() -> None:
    def count(text: str) -> int:
        return 10 * len(text)

    events = await split(["a", "b"], ReasoningOutput(R1, count))
    assert reasoning_tokens(events) == 2
