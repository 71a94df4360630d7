"""Reasoning models on every contract: the relay's text split into reasoning and answer, the
reasoning effort checked, and what a guide means when the output reasons.

The split happens on the relay's output side (``with_reasoning`` wraps any ``Relay``), so it
holds whatever contract produced the text (the engine path's ensemble or BLS, the llmapi
model): a served model's ``reasoning_parser`` (``[[models]]``) picks the format
(``families/reasoning``); without one nothing here runs. The answer's text goes on as
``TextDelta``s, so the tool-call parser downstream sees only the answer, never the reasoning;
the reasoning goes on as ``ReasoningDelta``s, and the ``Done`` gains ``reasoning_tokens``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from typing_extensions import assert_never

from gateway.errors import InvalidRequest
from gateway.families.calls import Outcome, TokenLogprob
from gateway.families.events import (
    ChoiceDone,
    Done,
    ReasoningDelta,
    Relay,
    TextDelta,
    ToolCallPiece,
)
from gateway.families.reasoning import REASONING_PARSERS, ReasoningFormat, Split
from gateway.location import location_of
from gateway.pipeline.structured.guides import Asked
from gateway.served import ServedRuntime


@dataclass(frozen=True)
class ReasoningOutput:
    """How one served model's answers are split: its format, and how a reasoning span's
    tokens are counted when their log probabilities were not asked for (its tokenizer;
    None: one per relayed piece, which is one per token on a streaming deployment)."""

    format: ReasoningFormat
    count_tokens: Callable[[str], int] | None = None


async def reasoning_output(served: ServedRuntime) -> ReasoningOutput | None:
    """The served model's reasoning split; None when it has no ``reasoning_parser``."""
    name = served.config.reasoning_parser
    if name is None:
        return None
    vocabulary = await served.vocabulary()
    return ReasoningOutput(REASONING_PARSERS[name], vocabulary.count if vocabulary else None)


def checked_effort(
    effort: str | None, served: ServedRuntime, param: str = "reasoning_effort"
) -> str | None:
    """The reasoning effort to carry to the prompt's rendering (``GenerationRequest.
    reasoning_effort``), or a 400 naming ``param``.

    A model with no reasoning parser does not reason: ``none`` asks for what it does anyway,
    anything else is refused. A reasoning model is steered only where its prompt rendering
    has a switch (``Family.reasoning_switch``: a chat template's ``enable_thinking``, which the
    template rendering reads from the returned value); the gateway's own renderings have none,
    so there an effort is refused rather than ignored."""
    if effort is None:
        return None
    model, at = served.config.id, location_of(param)  # named as the endpoint names it
    if served.config.reasoning_parser is None:
        if effort == "none":
            return None
        raise InvalidRequest(
            (
                f"model '{model}' is not served as a reasoning model (its [[models]] entry names "
                "no reasoning_parser), so ",
                at,
                f" {effort!r} cannot be honoured",
            ),
            param=param,
            code="unsupported_parameter",
        )
    if not served.family.reasoning_switch:
        raise InvalidRequest(
            (
                f"model '{model}''s prompt is rendered by the gateway's '{served.family.name}' "
                "family, which has no reasoning switch (a chat template's enable_thinking): ",
                at,
                " cannot be honoured; drop it",
            ),
            param=param,
            code="unsupported_parameter",
        )
    return effort


def check_guide(asked: Asked | None, output: ReasoningOutput | None) -> None:
    """A guide on Triton constrains the whole output, reasoning included (vLLM's
    reasoning-aware backends guide only the answer). Where the output may start with the
    answer (``qwen3``) the guide shapes it all, and the model writes no reasoning unless the
    guide itself has the ``<think>`` block; where the prompt opened the reasoning
    (``deepseek_r1``) the whole guided output would be reasoning and the answer empty: a 400."""
    if asked is None or output is None or not output.format.starts_in_reasoning:
        return
    raise InvalidRequest(
        (
            "'",
            asked.param,
            f"' cannot be enforced on a '{output.format.name}' reasoning model "
            "here: Triton's guided decoding constrains the whole output, which starts inside the "
            "model's reasoning, so the answer would be empty",
        ),
        param=asked.param,
        code="unsupported_parameter",
    )


class _Tokens:
    """Pairs the split's raw characters with the tokens that wrote them, in order (as
    ``pipeline/logprobs.ScoredText`` does for the stop matcher): a token goes with the side
    that decides its first character."""

    def __init__(self) -> None:
        self._pending: deque[tuple[int, TokenLogprob]] = deque()
        self._written = 0  # raw characters the tokens hold
        self._decided = 0  # raw characters the split has decided

    def add(self, tokens: tuple[TokenLogprob, ...]) -> None:
        for token in tokens:
            self._pending.append((self._written, token))
            self._written += len(token.token)

    def take(self, raw: int) -> tuple[TokenLogprob, ...]:
        self._decided += raw
        taken = []
        while self._pending and self._pending[0][0] < self._decided:
            taken.append(self._pending.popleft()[1])
        return tuple(taken)


class _Choice:
    """One choice's split, and what its reasoning cost."""

    def __init__(self, output: ReasoningOutput) -> None:
        self.output = output
        self.splitter = output.format.splitter()
        self.tokens: _Tokens | None = None  # log probabilities asked for
        self.raw: list[str] = []  # the raw text of the reasoning so far (tags included)
        self.pieces = 0  # relayed pieces inside the reasoning (or that began or ended it)
        self.scored = 0  # tokens that went to the reasoning
        self._held = ""  # raw text fed but not decided yet (a possible tag)

    def feed(
        self, text: str, tokens: tuple[TokenLogprob, ...] | None
    ) -> list[ReasoningDelta | TextDelta]:
        inside = self.splitter.state == "reasoning"
        split = self.splitter.feed(text)
        if inside or split.reasoning_raw:
            self.pieces += 1
        return self._events(split, text, tokens)

    def close(self) -> list[ReasoningDelta | TextDelta]:
        """What the end let out (tokens past the text, cut by a stop string, are dropped, as
        ``ScoredText.end`` drops them)."""
        return self._events(self.splitter.close(), "", None)

    def _events(
        self, split: Split, text: str, tokens: tuple[TokenLogprob, ...] | None
    ) -> list[ReasoningDelta | TextDelta]:
        """The split's reasoning, then its answer, each with its tokens."""
        whole = self._held + text
        self._held = whole[split.reasoning_raw + len(split.content) :]
        if split.reasoning_raw and self.output.count_tokens is not None:
            self.raw.append(whole[: split.reasoning_raw])
        thought: tuple[TokenLogprob, ...] | None = None
        said: tuple[TokenLogprob, ...] | None = None
        if tokens is not None or self.tokens is not None:
            if self.tokens is None:
                self.tokens = _Tokens()
            self.tokens.add(tokens or ())
            thought = self.tokens.take(split.reasoning_raw)
            self.scored += len(thought)
            said = self.tokens.take(len(split.content))
        out: list[ReasoningDelta | TextDelta] = []
        if split.reasoning or thought:
            out.append(ReasoningDelta(split.reasoning, 0, thought))
        if split.content or said:
            out.append(TextDelta(split.content, 0, said))
        return out

    def count(self, outcome: Outcome) -> Outcome:
        """The outcome with the reasoning's tokens (never more than the completion's)."""
        if self.tokens is not None:
            counted = self.scored
        elif self.output.count_tokens is not None:
            counted = self.output.count_tokens("".join(self.raw)) if self.raw else 0
        else:
            counted = self.pieces
        usage = outcome.usage
        counted = min(counted, usage.completion_tokens)
        return replace(outcome, usage=replace(usage, reasoning_tokens=counted))


async def with_reasoning(events: Relay, output: ReasoningOutput) -> Relay:
    """One choice's relay (its events are choice 0's) with its text split into reasoning and
    answer; its ``Done`` with the reasoning's tokens counted."""
    state = _Choice(output)
    try:
        async for event in events:
            match event:
                case TextDelta(text, _, tokens):
                    for piece in state.feed(text, tokens):
                        yield piece
                case Done(outcome):
                    for piece in state.close():
                        yield piece
                    yield Done(state.count(outcome))
                case ReasoningDelta() | ToolCallPiece() | ChoiceDone():
                    yield event
                case _:
                    assert_never(event)
    finally:
        await events.aclose()
