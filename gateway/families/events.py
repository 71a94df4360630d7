"""What a relay yields: one closed set of events, each naming the choice it belongs to.

Every streamed or collected answer is a sequence of these: ``TextDelta``s,
``ReasoningDelta``s (a reasoning model's thinking, split from its answer by the served model's
reasoning parser) and ``ToolCallPiece``s as the model writes them, a ``ChoiceDone`` per choice
when a request has several, then one ``Done`` with the request's ``Outcome``. The set is
closed: a writer ``match``es on ``RelayEvent`` and ends with ``assert_never``, so an event kind
added here is a type error in every writer that does not handle it.

They are ``NamedTuple``s: immutable, matched by class pattern, and built with one
``tuple.__new__`` (the relay makes one per token).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import NamedTuple

from gateway.families.calls import Outcome, TokenLogprob
from gateway.families.tool_formats.base import ToolCallDelta


class TextDelta(NamedTuple):
    """A piece of choice ``choice``'s text; ``tokens`` are the tokens it holds with their log
    probabilities when they were asked for (None: not asked; a stop string may cut a token,
    so their texts joined are the piece, or a little more)."""

    text: str
    choice: int = 0
    tokens: tuple[TokenLogprob, ...] | None = None


class ReasoningDelta(NamedTuple):
    """A piece of choice ``choice``'s reasoning (the text inside ``<think>...</think>``), with
    the tokens that wrote it when log probabilities were asked for (the tags' tokens among
    them, so a piece may be empty text carrying tokens). Never seen by a tool-call parser."""

    text: str
    choice: int = 0
    tokens: tuple[TokenLogprob, ...] | None = None


class ToolCallPiece(NamedTuple):
    """A piece of a function call choice number ``choice`` is making."""

    delta: ToolCallDelta
    choice: int = 0


class ChoiceDone(NamedTuple):
    """Choice number ``choice`` ended (a request of one choice ends with ``Done`` alone)."""

    outcome: Outcome
    choice: int


class Done(NamedTuple):
    """The request ended: its outcome (usage summed over its choices). Always the last."""

    outcome: Outcome


_new = tuple.__new__


def text_delta(text: str) -> TextDelta:
    """``TextDelta(text)`` at half the cost (the relay makes one per token; a ``NamedTuple``'s
    own ``__new__`` is a Python function filling in the defaults)."""
    return _new(TextDelta, (text, 0, None))


RelayEvent = TextDelta | ReasoningDelta | ToolCallPiece | ChoiceDone | Done
# A relay: closing it (``aclose``) cancels the Triton calls behind it.
Relay = AsyncGenerator[RelayEvent, None]
