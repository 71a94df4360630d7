"""The streaming splitter behind every ``<think>``-tag reasoning format.

A reasoning model writes its reasoning first, between ``<think>`` and ``</think>``, then its
answer. The text arrives in pieces that may cut a tag anywhere (``"</th"`` + ``"ink>"``), so the
splitter holds back the end of a piece that could be the start of a tag until the next piece
decides it: a tag is never let out as text, and nothing but a possible tag is ever held.
Everything is a pure function of the text fed so far; the same splitter reads a streamed
answer and a whole one, so both give the same split.

Each ``Split`` also says how many characters of the model's raw text it accounts for on the
reasoning side (its text and the tags around it): the tokens that wrote those characters are
the reasoning's tokens (their log probabilities, ``reasoning_tokens`` in the usage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

START = "<think>"
END = "</think>"

State = Literal["start", "reasoning", "content"]


class Split(NamedTuple):
    """What one piece let out: reasoning text, then answer text (always in that order: the
    reasoning comes first), and the raw characters decided as reasoning, tags included."""

    reasoning: str
    content: str
    reasoning_raw: int


_NOTHING = Split("", "", 0)


@dataclass(frozen=True)
class ReasoningFormat:
    """A ``<think>``-tag format. ``starts_in_reasoning``: the prompt opened the reasoning block
    (DeepSeek-R1), so the output is reasoning until ``</think>``; otherwise (Qwen3) it is
    reasoning only when it opens with ``<think>``."""

    name: str
    starts_in_reasoning: bool

    def splitter(self) -> ThinkSplitter:
        return ThinkSplitter(self.starts_in_reasoning)


def _held_prefix(text: str, tag: str) -> int:
    """How many characters at the end of ``text`` could be the start of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class ThinkSplitter:
    """One choice's text, piece by piece, into reasoning and answer."""

    def __init__(self, starts_in_reasoning: bool) -> None:
        self._starts_in_reasoning = starts_in_reasoning
        self.state: State = "start"
        self._held = ""  # text that may be (the start of) a tag, not decided yet

    def feed(self, text: str) -> Split:
        if self.state == "content":  # the answer: passed on as it comes
            return Split("", text, 0) if text else _NOTHING
        self._held += text
        if self.state == "start":
            return self._start()
        return self._reasoning(0)

    def close(self) -> Split:
        """The end of the output: text still held was no tag after all."""
        held, self._held = self._held, ""
        if self.state == "content" or not held:
            return _NOTHING
        if self.state == "start" and not self._starts_in_reasoning:
            self.state = "content"
            return Split("", held, 0)
        self.state = "reasoning"
        return Split(held, "", len(held))

    def _start(self) -> Split:
        """Before the first word: an opening ``<think>`` (after any whitespace) is markup."""
        held = self._held
        stripped = held.lstrip()
        if stripped.startswith(START):
            self.state = "reasoning"
            skipped = len(held) - len(stripped) + len(START)
            self._held = held[skipped:]
            return self._reasoning(skipped)
        if START.startswith(stripped):  # whitespace, or a cut "<thi": wait for more
            return _NOTHING
        if self._starts_in_reasoning:
            self.state = "reasoning"
            return self._reasoning(0)
        self.state, self._held = "content", ""
        return Split("", held, 0)

    def _reasoning(self, tags: int) -> Split:
        """Inside the reasoning: up to ``</think>``, then the answer; ``tags``: raw markup
        characters already decided by this piece (an opening ``<think>``)."""
        held = self._held
        end = held.find(END)
        if end >= 0:
            self.state, self._held = "content", ""
            return Split(held[:end], held[end + len(END) :], tags + end + len(END))
        keep = _held_prefix(held, END)
        out = held[: len(held) - keep]
        self._held = held[len(out) :]
        return Split(out, "", tags + len(out))
