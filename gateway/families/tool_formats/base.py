"""Tool calling in neutral terms: the tools offered, the calls made, and a format's contract.

A model family declares the tool-call format its checkpoints were trained on (``Family.
tool_format``). The format does two things, both pure: it *lowers* a conversation that carries
tools, assistant tool calls and tool results into plain turns whose text holds the format's
markup (so the family's ``render`` needs to know nothing of tools), and it gives a streaming
*parser* that splits the model's output back into content and ``ToolCallDelta``s.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gateway.families.base import Conversation


@dataclass(frozen=True)
class ToolSpec:
    """One function a request offers (OpenAI's ``tools[].function``)."""

    name: str
    description: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    strict: bool | None = None

    def openai(self) -> dict[str, Any]:
        """The tool as OpenAI's wire (and every chat template's ``tools`` variable) holds it."""
        function: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            function["description"] = self.description
        function["parameters"] = dict(self.parameters)
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class ToolCall:
    """One call: ``arguments`` is the JSON text of the arguments object, as OpenAI sends it."""

    id: str
    name: str
    arguments: str

    def arguments_object(self) -> Any:
        """The arguments decoded (templates write them as JSON values, not strings)."""
        return json.loads(self.arguments)


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of the ``index``-th call of one choice: the first piece carries ``id`` and
    ``name`` (OpenAI sends them once), later ones only more ``arguments`` text."""

    index: int
    arguments: str = ""
    id: str | None = None
    name: str | None = None

    def __bool__(self) -> bool:
        return True


def new_call_id() -> str:
    """A call id as OpenAI spells them: ``call_`` and 24 random hex digits."""
    return "call_" + secrets.token_hex(12)


Piece = str | ToolCallDelta


class ToolParser(Protocol):
    """Splits one choice's output, fed as it streams, into content and call deltas."""

    @property
    def calls(self) -> int: ...  # calls emitted so far

    def feed(self, text: str) -> list[Piece]: ...

    # ``cut``: the output ended at max_tokens, not by itself. A call it was writing is then
    # given as far as it got (its arguments unfinished), as a stream has already sent it.
    def close(self, cut: bool = False) -> list[Piece]: ...


class ToolFormat(Protocol):
    """How one family of checkpoints writes tools, calls and results."""

    @property
    def name(self) -> str: ...

    def lower(self, conversation: Conversation, tools: Sequence[ToolSpec]) -> Conversation:
        """Tools, assistant calls and tool results as plain turns in the format's markup."""
        ...

    def parser(self, streaming: bool) -> ToolParser:
        """A parser for one choice's output. ``streaming``: deltas as soon as a call's name is
        known; otherwise a call is emitted only once it is complete and well formed (a
        malformed one stays content)."""
        ...


def dumps(value: Any) -> str:
    """JSON as Hugging Face chat templates' ``tojson`` writes it (``json.dumps`` defaults,
    non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)
