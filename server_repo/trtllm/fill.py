"""Fill ``${name}`` placeholders in a ``config.pbtxt`` template, and refuse unfillable ones.

A placeholder left inside a quoted string is harmless (the backend reads ``"${x}"`` as
unset), but one left in a bare position (``max_batch_size: ${x}``, ``data_type: ${x}``)
makes the file unparseable, so Triton would refuse the model at start-up, minutes later
and with a less useful message. That is reported here, naming the file and the names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: A quoted string or a comment, whichever starts first ('#' in a string is not a comment).
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|#[^\n]*')


@dataclass(frozen=True)
class Filled:
    """A filled template: its text, the names used, and those left for backend defaults."""

    text: str
    used: frozenset[str]
    left_quoted: frozenset[str]
    left_bare: frozenset[str]


def _strip(text: str, keep_strings: bool) -> str:
    """``text`` without comments, and without quoted strings unless ``keep_strings``."""

    def drop(match: re.Match[str]) -> str:
        token = match.group(0)
        return token if keep_strings and token.startswith('"') else ""

    return _STRING_OR_COMMENT.sub(drop, text)


def fill_template(text: str, values: Mapping[str, str]) -> Filled:
    """Replace every placeholder that has a value; classify the ones that do not."""
    used: set[str] = set()

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in values:
            used.add(name)
            return values[name]
        return match.group(0)

    filled = PLACEHOLDER.sub(substitute, text)
    left = set(PLACEHOLDER.findall(_strip(filled, keep_strings=True)))
    bare = set(PLACEHOLDER.findall(_strip(filled, keep_strings=False)))
    return Filled(filled, frozenset(used), frozenset(left - bare), frozenset(bare))
