"""The explicit family name -> Family table. Adding a family is one module plus one line."""

from __future__ import annotations

from gateway.families.base import Family
from gateway.families.llava import Llava
from gateway.families.llava_onevision import LlavaOnevision

SUPPORTED_FAMILIES: dict[str, type[Family]] = {
    Llava.name: Llava,
    LlavaOnevision.name: LlavaOnevision,
}


def get_family(name: str) -> Family:
    """The family called ``name``; a config naming an unknown one fails at start-up."""
    try:
        return SUPPORTED_FAMILIES[name]()
    except KeyError:
        known = ", ".join(sorted(SUPPORTED_FAMILIES))
        raise ValueError(f"unknown model family {name!r}; known: {known}") from None
