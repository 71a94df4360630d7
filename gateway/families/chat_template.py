"""A model's own chat template, rendered the way Hugging Face renders it, in jinja2's sandbox.

NVIDIA's ``llmapi`` Triton model takes a finished prompt for text (``text_input``), so the
gateway renders the conversation with the checkpoint's template: ``chat_template`` in
``tokenizer_config.json`` (a string, or a list of named templates of which ``default`` and
``tool_use`` are read) or ``chat_template.jinja`` beside it. The environment is what
transformers (``apply_chat_template``), vLLM and trtllm-serve use: an
``ImmutableSandboxedEnvironment`` with ``trim_blocks``/``lstrip_blocks``, the loop-control
extension, ``raise_exception``, ``strftime_now`` and a ``tojson`` that keeps non-ASCII text.

The template is the deployment's; the messages are the client's. The sandbox refuses attribute
access to Python internals (a template or a message cannot reach ``__class__``), ``range`` is
bounded by the sandbox, and ``render`` stops as soon as the output passes ``max_chars``, so a
template that loops over a huge message cannot build a huge prompt. Callers run ``render`` off
the event loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import jinja2
from jinja2 import meta
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from gateway.errors import InvalidRequest

# Template variables a template may read to switch a model's thinking on or off: Qwen3's
# ``enable_thinking``, DeepSeek's and Granite's ``thinking``, Hunyuan's ``reasoning_effort``.
THINKING_SWITCHES = ("enable_thinking", "thinking", "reasoning_effort")


class TemplateError(ValueError):
    """The deployment's template cannot be read or compiled (a start-up error)."""


def _raise_exception(message: str) -> NoReturn:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """Hugging Face's ``tojson``: keys in order, non-ASCII kept (jinja2's own escapes HTML)."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols], autoescape=False
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


class ChatTemplate:
    """One checkpoint's chat template, compiled once; ``render`` is pure and thread-safe."""

    def __init__(
        self, source: str, special: Mapping[str, str] | None = None, tool_source: str = ""
    ) -> None:
        self._env = _environment()
        try:
            self._template = self._env.from_string(source)
            self._tool_template = self._env.from_string(tool_source) if tool_source else None
            variables = meta.find_undeclared_variables(self._env.parse(source))
            if tool_source:
                variables |= meta.find_undeclared_variables(self._env.parse(tool_source))
        except jinja2.exceptions.TemplateError as exc:
            raise TemplateError(f"the chat template does not compile: {exc}") from exc
        self.variables = frozenset(variables)
        self.special = dict(special or {})  # bos_token, eos_token... as the template reads them

    @classmethod
    def load(cls, folder: Path) -> ChatTemplate:
        """From a Hugging Face model folder; ``TemplateError`` says what is missing."""
        config_file = folder / "tokenizer_config.json"
        config: dict[str, Any] = {}
        if config_file.is_file():
            try:
                config = json.loads(config_file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise TemplateError(f"cannot read {config_file}: {exc}") from exc
        source, tool_source = _sources(config.get("chat_template"))
        jinja_file = folder / "chat_template.jinja"
        if not source and jinja_file.is_file():
            source = jinja_file.read_text(encoding="utf-8")
        if not source:
            raise TemplateError(
                f"{folder} has no chat template (neither 'chat_template' in "
                "tokenizer_config.json nor chat_template.jinja)"
            )
        special = {
            name: _token_text(config[name])
            for name in ("bos_token", "eos_token", "pad_token", "unk_token")
            if config.get(name) is not None
        }
        return cls(source, special, tool_source)

    def reads(self, name: str) -> bool:
        """Whether the template reads the variable ``name`` (``tools``, ``enable_thinking``)."""
        return name in self.variables

    @property
    def thinking_switch(self) -> str | None:
        """The variable this template switches thinking with, if any."""
        return next((name for name in THINKING_SWITCHES if self.reads(name)), None)

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_chars: int,
        tools: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """The prompt for ``messages`` with the generation prompt added; a 400 when the
        template refuses the conversation (``raise_exception``) or the prompt passes
        ``max_chars`` (rendering stops there)."""
        template = self._tool_template if tools and self._tool_template else self._template
        context = {
            **self.special,
            **(extra or {}),
            "messages": messages,
            "tools": list(tools) if tools else None,
            "add_generation_prompt": True,
        }
        pieces: list[str] = []
        size = 0
        try:
            for piece in template.generate(**context):
                size += len(piece)
                if size > max_chars:
                    raise InvalidRequest(
                        f"the prompt this model's chat template renders passes {max_chars} "
                        "characters; send a shorter conversation",
                        param="messages",
                        code="context_length_exceeded",
                    )
                pieces.append(piece)
        except jinja2.exceptions.SecurityError as exc:
            raise InvalidRequest(
                f"the model's chat template was refused by the sandbox: {exc}", param="messages"
            ) from None
        except jinja2.exceptions.TemplateError as exc:
            raise InvalidRequest(
                f"the model's chat template refuses this conversation: {exc}", param="messages"
            ) from None
        except InvalidRequest:
            raise
        except Exception as exc:  # a template's own Python error on shapes it did not expect
            raise InvalidRequest(
                "the model's chat template cannot render this conversation "
                f"({type(exc).__name__}: {exc})",
                param="messages",
            ) from None
        return "".join(pieces)


def _sources(value: object) -> tuple[str, str]:
    """(default template, tool-use template) from ``tokenizer_config.json``'s
    ``chat_template``: a string, or a list of ``{"name", "template"}``."""
    if isinstance(value, str):
        return value, ""
    if isinstance(value, list):
        named = {
            str(entry.get("name")): str(entry.get("template", ""))
            for entry in value
            if isinstance(entry, dict)
        }
        return named.get("default", ""), named.get("tool_use", "")
    return "", ""


def _token_text(value: object) -> str:
    """A special token as ``tokenizer_config.json`` writes it: text, or ``{"content": ...}``."""
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return str(value)
