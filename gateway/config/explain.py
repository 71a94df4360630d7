"""Configuration mistakes in words: where each one is (the setting's dotted path, and the
``MMGW_`` variable that sets it) and what is wrong, without pydantic's own report format.

``mmgw`` prints these as ``mmgw: configuration error: ...`` and exits 2; a traceback or
``1 validation error for _FromFile ... [type=value_error, input_value=...]`` tells a user
what pydantic saw, not what to change.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError
from pydantic_core import ErrorDetails

# pydantic's prefix for a message raised by a validator, which is already a sentence.
_VALIDATOR_PREFIXES = ("Value error, ", "Assertion failed, ")


def setting_path(location: Sequence[int | str]) -> str:
    """``("models", 0, "family")`` -> ``models[0].family``."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def _message(error: ErrorDetails) -> str:
    message = str(error["msg"])
    for prefix in _VALIDATOR_PREFIXES:
        message = message.removeprefix(prefix)
    if error["type"] == "extra_forbidden":
        return "unknown setting (a typo?)"
    if error["type"] == "missing":
        return "required, and not given"
    if "input" in error and error["type"] not in {"value_error", "assertion_error"}:
        given = error["input"]
        if isinstance(given, str | int | float | bool):
            message += f" (given {given!r})"
    return message


def explain(error: ValidationError) -> str:
    """Every problem of ``error``, one per line: ``where: what``."""
    lines = []
    for problem in error.errors(include_url=False):
        location = [part for part in problem["loc"] if part not in {"function-after", ""}]
        where = setting_path(location)
        lines.append(f"{where}: {_message(problem)}" if where else _message(problem))
    return "\n  ".join(lines)
