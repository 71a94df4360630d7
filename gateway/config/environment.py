"""``MMGW_`` variables that set nothing: found, so a misspelling is not silently ignored.

pydantic-settings reads only the variables that match a setting (``MMGW_SERVER__PORT``) and
passes over the rest, so ``MMGW_SERVER_PORT=9000`` (one underscore) serves on 8000 without a
word. Every ``MMGW_`` name that maps to no setting is reported, except the families that are
read elsewhere on purpose.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

PREFIX = "MMGW_"
NESTING = "__"
# Read by others, not by Settings: the reference models inside Triton (MMGW_REFERENCE_*), a
# worker of `mmgw serve --workers` (MMGW_WORKER_*), the test suite (MMGW_TEST_*).
READ_ELSEWHERE = ("MMGW_REFERENCE_", "MMGW_WORKER_", "MMGW_TEST_")


def _sections(annotation: Any) -> Iterable[type[BaseModel]]:
    """The settings models inside a field's type (``X | None`` included)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    elif get_origin(annotation) in {Union, types.UnionType}:
        for arg in get_args(annotation):
            yield from _sections(arg)


def _is_dict(annotation: Any) -> bool:
    return annotation is dict or get_origin(annotation) is dict


def setting_names(model: type[BaseModel], prefix: str = PREFIX) -> tuple[set[str], set[str]]:
    """``(names, open_prefixes)``: every variable name that sets something, and the
    prefixes under which any name does (a dict setting, such as ``embedded.checkpoints``)."""
    names: set[str] = set()
    open_prefixes: set[str] = set()
    for field_name, field in model.model_fields.items():
        name = prefix + field_name.upper()
        names.add(name)
        sections = list(_sections(field.annotation))
        for section in sections:
            inner, inner_open = setting_names(section, name + NESTING)
            names |= inner
            open_prefixes |= inner_open
        if _is_dict(field.annotation) or (
            get_origin(field.annotation) in {Union, types.UnionType}
            and any(_is_dict(arg) for arg in get_args(field.annotation))
        ):
            open_prefixes.add(name + NESTING)
    return names, open_prefixes


def unknown_variables(model: type[BaseModel], environ: Mapping[str, str]) -> list[str]:
    """One warning per ``MMGW_`` variable of ``environ`` that sets nothing in ``model``,
    naming the closest real one where there is one."""
    names, open_prefixes = setting_names(model)
    warnings = []
    for variable in sorted(environ):
        upper = variable.upper()
        if not upper.startswith(PREFIX) or upper in names:
            continue
        if upper.startswith(READ_ELSEWHERE) or upper.startswith(tuple(open_prefixes)):
            continue
        close = difflib.get_close_matches(upper, names, n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else ""
        warnings.append(f"{variable} sets no setting and is ignored{hint}")
    return warnings
