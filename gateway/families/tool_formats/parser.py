"""The streaming splitter every format shares: content, then calls in the format's markup.

A format is a ``Markup``: the markers that open a region of calls (``<tool_call>``,
``[TOOL_CALLS]``), how the calls inside are laid out (``scanner.Mode``), the marker that closes
a region (Hermes' ``</tool_call>``), and whether a bare JSON call at the very start of the
output counts (Llama 3, and the gateway's own forced-call output). ``MarkupParser`` holds back
any text that could be the start of a marker, so markup never reaches ``delta.content``.

Streaming, a call is sent as soon as its name is known and its arguments as they arrive; if the
text then turns out malformed, what follows is content (what was sent stays sent). Not
streaming, a region's calls are emitted only once the whole region is well formed; otherwise
its text is content, as written. An output cut by ``max_tokens`` mid-region gives the calls
as far as they got either way (``close(cut=True)``): finish_reason ``length`` says why their
arguments are unfinished.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.families.tool_formats.base import Piece, ToolCallDelta, ToolParser, new_call_id
from gateway.families.tool_formats.scanner import CallStream, Event, Malformed, Mode


@dataclass(frozen=True)
class Markup:
    """Where a format's calls are in the text, and how they are laid out."""

    starts: tuple[str, ...]
    mode: Mode
    end: str | None = None  # closes each region (Hermes); None: the region ends with its JSON
    json_at_start: bool = False  # a call may open the output without a marker


class MarkupParser:
    """One choice's output -> content pieces and ``ToolCallDelta``s (see the module)."""

    def __init__(self, markup: Markup, streaming: bool) -> None:
        self.markup = markup
        self.streaming = streaming
        self.state = "content"  # content | region | after | plain (gave up: all content)
        self.pending = ""
        self.emitted_text = False  # any non-blank content sent (no bare JSON call after it)
        self.calls = 0
        self.stream: CallStream | None = None
        self.region: list[str] = []  # the raw text of the open region
        self.sent_in_region = False
        self.current: _Call | None = None
        self.region_calls: list[_Call] = []

    def feed(self, text: str) -> list[Piece]:
        out: list[Piece] = []
        while text:
            if self.state == "content":
                text = self._content(text, out)
            elif self.state == "region":
                text = self._region(text, out)
            elif self.state == "after":
                text = self._after(text)
            else:
                out.append(text)
                text = ""
        return out

    def close(self, cut: bool = False) -> list[Piece]:
        out: list[Piece] = []
        if cut and not self.streaming and self.state == "region":
            self._cut(out)  # what a stream would have sent of the unfinished region
        elif self.state == "region" and self.stream is not None:
            try:
                self._events(self.stream.close(), out)
            except Malformed:
                self._give_up(out, "")
        pending = self.pending
        if self.state in ("content", "plain") and pending and (pending.strip() or not self.calls):
            out.append(pending)
        self.pending = ""
        return out

    # -- content --------------------------------------------------------------------------------

    def _content(self, text: str, out: list[Piece]) -> str:
        pending = self.pending + text
        markup = self.markup
        at, marker = _first_marker(pending, markup.starts)
        if markup.json_at_start and not self.emitted_text and not self.calls:
            stripped = pending.lstrip()
            opener = "[" if markup.mode == "array" else "{"
            if stripped.startswith(opener) and (at < 0 or pending.index(opener) < at):
                self.pending = ""
                self._open(out, "")
                return pending
            if not stripped:
                self.pending = pending
                return ""
        if at >= 0:
            self._emit(pending[:at], out)
            self.pending = ""
            self._open(out, marker)
            return pending[at + len(marker) :]
        keep = _held_back(pending, markup.starts)
        self._emit(pending[: len(pending) - keep], out)
        self.pending = pending[len(pending) - keep :]
        return ""

    def _emit(self, text: str, out: list[Piece]) -> None:
        """Content; blank text after a call is held (it is only the space between calls)."""
        if not text:
            return
        if self.calls and not text.strip():
            self.pending = text
            return
        out.append(text)
        self.emitted_text = self.emitted_text or bool(text.strip())

    def _open(self, out: list[Piece], marker: str) -> None:
        self.state = "region"
        self.stream = CallStream(self.markup.mode)
        self.region = [marker]
        self.sent_in_region = False
        self.region_calls = []

    # -- calls ----------------------------------------------------------------------------------

    def _region(self, text: str, out: list[Piece]) -> str:
        assert self.stream is not None
        self.region.append(text)
        try:
            events = self.stream.feed(text)
        except Malformed as exc:
            return self._give_up(out, text[exc.at :])
        return self._events(events, out)

    def _events(self, events: list[Event], out: list[Piece]) -> str:
        """Turn the scanner's events into deltas; the text after a finished region."""
        for kind, value in events:
            if kind == "name":
                call = self._call()
                call.name = value
                if self.streaming:
                    out.append(ToolCallDelta(call.index, call.take(), call.id, value))
                    call.announced = True
                    self.sent_in_region = True
            elif kind == "args":
                call = self._call()
                call.arguments.append(value)
                if self.streaming and call.announced:
                    out.append(ToolCallDelta(call.index, call.take()))
            elif kind == "end":
                self.region_calls.append(self._call())
                self.current = None
                self.calls += 1
            else:  # done: the region is complete
                if not self.streaming:
                    out.extend(c.whole() for c in self.region_calls)
                self.state = "after" if self.markup.end else "content"
                self.stream = None
                return value
        return ""

    def _call(self) -> _Call:
        if self.current is None:
            self.current = _Call(self.calls)
        return self.current

    def _give_up(self, out: list[Piece], rest: str) -> str:
        """Malformed: unsent text of the region is content, and so is all that follows."""
        if self.streaming and self.sent_in_region:
            self.calls += 1 if self.current is not None and self.current.announced else 0
            text = rest
        else:
            self.calls -= len(self.region_calls)
            text = "".join(self.region)
        self.current = None
        self.state, self.stream = "plain", None
        if text:
            out.append(text)
        return ""

    def _cut(self, out: list[Piece]) -> None:
        """The output ran out mid-region: its finished calls, and the one being written once
        its name is known (arguments unfinished), rather than the region as content."""
        current = self.current
        calls = [*self.region_calls, *([current] if current is not None and current.name else [])]
        if not calls:
            out.append("".join(self.region))
        self.calls += len(calls) - len(self.region_calls)
        out.extend(c.whole() for c in calls)
        self.current, self.state, self.stream = None, "plain", None

    def _after(self, text: str) -> str:
        """Between a region and its end marker: blanks, then the marker (held while partial)."""
        end = self.markup.end or ""
        pending = (self.pending + text).lstrip()
        if pending.startswith(end):
            self.pending, self.state = "", "content"
            return pending[len(end) :]
        if end.startswith(pending):
            self.pending = pending
            return ""
        self.pending, self.state = "", "content"
        return pending


class FirstCallOnly:
    """A parser whose output keeps one call (``parallel_tool_calls: false``, and the
    deprecated ``functions`` API): a format lets a model write several, the request allows
    one, so later calls are not sent."""

    def __init__(self, parser: ToolParser) -> None:
        self.parser = parser

    @property
    def calls(self) -> int:
        return min(self.parser.calls, 1)

    def feed(self, text: str) -> list[Piece]:
        return _first(self.parser.feed(text))

    def close(self, cut: bool = False) -> list[Piece]:
        return _first(self.parser.close(cut))


def _first(pieces: list[Piece]) -> list[Piece]:
    return [p for p in pieces if not isinstance(p, ToolCallDelta) or p.index == 0]


class _Call:
    """A call being read: its arguments text, sent or not yet."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.id = new_call_id()
        self.name = ""
        self.arguments: list[str] = []
        self.announced = False

    def take(self) -> str:
        text = "".join(self.arguments)
        self.arguments = []
        return text

    def whole(self) -> ToolCallDelta:
        return ToolCallDelta(self.index, self.take(), self.id, self.name)


def _first_marker(text: str, markers: tuple[str, ...]) -> tuple[int, str]:
    best, found = -1, ""
    for marker in markers:
        at = text.find(marker)
        if at >= 0 and (best < 0 or at < best):
            best, found = at, marker
    return best, found


def _held_back(text: str, markers: tuple[str, ...]) -> int:
    """How many characters at the end of ``text`` could begin a marker."""
    longest = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return longest
