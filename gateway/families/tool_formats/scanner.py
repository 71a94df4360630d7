"""An incremental scanner for tool calls written as JSON objects, fed as the model streams.

Every format the gateway parses writes a call as a JSON object holding the function's name and
its arguments (``{"name": ..., "arguments": {...}}``; Llama 3 says ``"parameters"``), alone, in
an array (Mistral, and the gateway's own forced-call schema) or in a ``;``-separated sequence
(Llama 3). ``CallStream`` reads such text a piece at a time and reports the name once it is
complete and the arguments' raw JSON text as it arrives, so a stream can send
``delta.tool_calls`` without waiting for the call's end. It validates structure only (nesting,
strings, separators), which is what a call's boundaries need; a malformed call raises
``Malformed`` and the caller decides what becomes of its text.
"""

from __future__ import annotations

import json
from typing import Literal

Mode = Literal["object", "array", "sequence"]
# ("name", the function's name) | ("args", raw arguments text) | ("end", "") after each call |
# ("done", the text after the container) once the container is complete.
Event = tuple[str, str]
NAME_KEYS = frozenset({"name"})
ARGUMENT_KEYS = frozenset({"arguments", "parameters"})
_PRIMITIVE = frozenset("+-.0123456789eEtruefalsn")
_AFTER_PRIMITIVE = frozenset(" \t\r\n,}];")
# What may stand outside strings inside an object or array: anything else (``<`` of a closing
# tag, say) means the text is not JSON, and is caught where it appears.
_IN_CONTAINER = frozenset(" \t\r\n{}[],:") | _PRIMITIVE


class Malformed(ValueError):
    """The text is not a call of the expected shape; ``at`` is where, in the last piece."""

    def __init__(self, why: str, at: int = 0) -> None:
        super().__init__(why)
        self.at = at


class _Value:
    """Where one JSON value ends, fed a character at a time (it does not decode)."""

    __slots__ = ("depth", "escape", "in_string", "kind")

    def __init__(self) -> None:
        self.kind = ""  # "c" container, "s" string, "p" number / true / false / null
        self.depth = 0
        self.in_string = False
        self.escape = False

    def feed(self, ch: str) -> int:
        """0: ``ch`` is inside the value; 1: ``ch`` completes it; -1: it ended before ``ch``."""
        if self.in_string:
            if self.escape:
                self.escape = False
            elif ch == "\\":
                self.escape = True
            elif ch == '"':
                self.in_string = False
                if self.kind == "s":
                    return 1
            return 0
        if self.kind == "c":
            if ch == '"':
                self.in_string = True
            elif ch in "{[":
                self.depth += 1
            elif ch in "}]":
                self.depth -= 1
                if self.depth == 0:
                    return 1
            elif ch not in _IN_CONTAINER:
                raise Malformed(f"unexpected {ch!r} in a value")
            return 0
        if self.kind == "p":
            if ch in _AFTER_PRIMITIVE:
                return -1
            if ch in _PRIMITIVE:
                return 0
            raise Malformed(f"unexpected {ch!r} in a value")
        if ch in "{[":
            self.kind, self.depth = "c", 1
        elif ch == '"':
            self.kind, self.in_string = "s", True
        elif ch in _PRIMITIVE:
            self.kind = "p"
        else:
            raise Malformed(f"unexpected {ch!r} where a value starts")
        return 0


class _CallObject:
    """One ``{"name": ..., "arguments": ...}`` object; other keys are skipped."""

    def __init__(self) -> None:
        self.state = "open"
        self.key: list[str] = []
        self.current = ""
        self.value = _Value()
        self.raw: list[str] = []
        self.name: str | None = None
        self.has_arguments = False
        self.done = False

    def feed(self, text: str, i: int, events: list[Event]) -> int:
        """Consume ``text`` from ``i`` until the object ends or the text does."""
        n = len(text)
        while i < n:
            state = self.state
            if state == "value":
                i = self._value(text, i, events)
                continue
            if state == "key":
                i = self._key(text, i)
                continue
            ch = text[i]
            if ch in " \t\r\n":
                i += 1
                continue
            if state == "open" and ch == "{":
                self.state = "key_or_end"
            elif state in ("key_or_end", "key_next") and ch == '"':
                self.state, self.key = "key", []
            elif state in ("key_or_end", "comma_or_end") and ch == "}":
                self._finish(events)
                return i + 1
            elif state == "colon" and ch == ":":
                self.state = "value_start"
            elif state == "comma_or_end" and ch == ",":
                self.state = "key_next"
            elif state == "value_start":
                self.state, self.value, self.raw = "value", _Value(), []
                continue  # the value's own first character
            else:
                raise Malformed(f"unexpected {ch!r} in a tool call", i)
            i += 1
        return i

    def _key(self, text: str, i: int) -> int:
        end = text.find('"', i)
        while end > 0 and _escaped(text, end, i, self.key):
            end = text.find('"', end + 1)
        if end < 0:
            self.key.append(text[i:])
            return len(text)
        self.key.append(text[i:end])
        self.current = json.loads('"' + "".join(self.key) + '"')
        self.state = "colon"
        return end + 1

    def _value(self, text: str, i: int, events: list[Event]) -> int:
        start, n, value, ended = i, len(text), self.value, 0
        while i < n:
            try:
                ended = value.feed(text[i])
            except Malformed as exc:
                exc.at = i
                raise
            if ended == 0:
                i += 1
                continue
            if ended == 1:
                i += 1
            break
        piece = text[start:i]
        streamed = self.current in ARGUMENT_KEYS and value.kind != "s"
        if streamed and piece:
            events.append(("args", piece))
        elif piece:
            self.raw.append(piece)
        if ended:
            self._value_done(events)
        return i

    def _value_done(self, events: list[Event]) -> None:
        self.state = "comma_or_end"
        key, raw = self.current, "".join(self.raw)
        if key in NAME_KEYS:
            name = json.loads(raw) if self.value.kind == "s" else None
            if not isinstance(name, str) or not name or self.name is not None:
                raise Malformed("a tool call's name must be one non-empty string")
            self.name = name
            events.append(("name", name))
        elif key in ARGUMENT_KEYS:
            if self.has_arguments:
                raise Malformed("a tool call has its arguments twice")
            self.has_arguments = True
            if self.value.kind == "s":  # arguments written as a JSON string of JSON
                events.append(("args", json.loads(raw)))

    def close(self) -> None:
        """The text ended inside the object."""
        raise Malformed("the tool call is incomplete")

    def _finish(self, events: list[Event]) -> None:
        if self.name is None:
            raise Malformed("a tool call has no name")
        if not self.has_arguments:
            events.append(("args", "{}"))
        self.done = True
        events.append(("end", ""))


def _escaped(text: str, at: int, start: int, before: list[str]) -> bool:
    """Whether the quote at ``at`` is escaped (an odd run of backslashes before it)."""
    run, j = 0, at - 1
    while j >= start and text[j] == "\\":
        run, j = run + 1, j - 1
    if j < start:
        tail = "".join(before)
        run += len(tail) - len(tail.rstrip("\\"))
    return run % 2 == 1


class CallStream:
    """Calls in a container (``mode``): one object, an array, or a ``;``-separated sequence."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.state = "start"
        self.call: _CallObject | None = None
        self.finished = False

    def feed(self, text: str) -> list[Event]:
        events: list[Event] = []
        i, n = 0, len(text)
        while i < n:
            if self.call is not None:
                i = self.call.feed(text, i, events)
                if self.call.done:
                    self.call, self.state = None, "separator"
                    if self.mode == "object":
                        return self._done(events, text[i:])
                continue
            ch = text[i]
            if ch in " \t\r\n":
                i += 1
                continue
            state, mode = self.state, self.mode
            if ch == "{" and (
                state in ("start", "next") and not (mode == "array" and state == "start")
            ):
                self.call = _CallObject()
                continue
            if state == "start" and mode == "array" and ch == "[":
                self.state = "first"
            elif state == "first" and ch == "{":
                self.call = _CallObject()
                continue
            elif state == "separator" and ch == ("," if mode == "array" else ";"):
                self.state = "next"
            elif state in ("first", "separator") and mode == "array" and ch == "]":
                return self._done(events, text[i + 1 :])
            elif state == "separator" and mode == "sequence":
                return self._done(events, text[i:])
            else:
                raise Malformed(f"unexpected {ch!r} between tool calls", i)
            i += 1
        return events

    def close(self) -> list[Event]:
        """The output ended: complete if every call is (an array may lack its ``]``)."""
        events: list[Event] = []
        if self.finished:
            return events
        if self.call is not None:
            self.call.close()
        if self.state != "separator":
            raise Malformed("the output ended before a tool call")
        return self._done(events, "")

    def _done(self, events: list[Event], rest: str) -> list[Event]:
        self.finished = True
        events.append(("done", rest))
        return events
