"""The reference architectures, by family name and by Triton model name (explicit registry)."""

from __future__ import annotations

from server_repo.reference_kit.archs.base import Arch, MediaFeatures
from server_repo.reference_kit.archs.llava import LlavaArch
from server_repo.reference_kit.archs.llava_onevision import LlavaOnevisionArch
from server_repo.reference_kit.archs.whisper import WhisperArch

ARCHS: dict[str, type[Arch]] = {
    LlavaArch.family: LlavaArch,
    LlavaOnevisionArch.family: LlavaOnevisionArch,
    WhisperArch.family: WhisperArch,
}


def get_arch(name: str) -> Arch:
    """The arch for a family name (``llava``) or a Triton model name (``reference_llava``)."""
    family = name.removeprefix("reference_")
    if family not in ARCHS:
        raise KeyError(f"unknown reference model {name!r}; known: {sorted(ARCHS)}")
    return ARCHS[family]()


__all__ = [
    "ARCHS",
    "Arch",
    "LlavaArch",
    "LlavaOnevisionArch",
    "MediaFeatures",
    "WhisperArch",
    "get_arch",
]
