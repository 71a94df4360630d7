"""The reference architectures, by family name and by Triton model name (explicit registry)."""

from __future__ import annotations

from server_repo.reference_kit.archs.base import Arch, MediaFeatures
from server_repo.reference_kit.archs.blip2 import Blip2OptArch, Blip2T5Arch
from server_repo.reference_kit.archs.cogvlm import CogVLMArch
from server_repo.reference_kit.archs.fuyu import FuyuArch
from server_repo.reference_kit.archs.internlm_xcomposer2 import InternLMXComposer2Arch
from server_repo.reference_kit.archs.kosmos2 import Kosmos2Arch
from server_repo.reference_kit.archs.llava import LlavaArch
from server_repo.reference_kit.archs.llava_next import LlavaNextArch
from server_repo.reference_kit.archs.llava_onevision import LlavaOnevisionArch
from server_repo.reference_kit.archs.mllama import MllamaArch
from server_repo.reference_kit.archs.neva import NevaArch, VideoNevaArch
from server_repo.reference_kit.archs.nougat import NougatArch
from server_repo.reference_kit.archs.phi3_vision import Phi3VisionArch
from server_repo.reference_kit.archs.pix2struct import Pix2StructArch
from server_repo.reference_kit.archs.qwen2_5_vl import Qwen25VLArch
from server_repo.reference_kit.archs.qwen2_vl import Qwen2VLArch
from server_repo.reference_kit.archs.vila import VilaArch
from server_repo.reference_kit.archs.whisper import WhisperArch

ARCHS: dict[str, type[Arch]] = {
    Blip2OptArch.family: Blip2OptArch,
    Blip2T5Arch.family: Blip2T5Arch,
    CogVLMArch.family: CogVLMArch,
    FuyuArch.family: FuyuArch,
    InternLMXComposer2Arch.family: InternLMXComposer2Arch,
    Kosmos2Arch.family: Kosmos2Arch,
    LlavaArch.family: LlavaArch,
    LlavaNextArch.family: LlavaNextArch,
    LlavaOnevisionArch.family: LlavaOnevisionArch,
    MllamaArch.family: MllamaArch,
    NevaArch.family: NevaArch,
    NougatArch.family: NougatArch,
    Phi3VisionArch.family: Phi3VisionArch,
    Pix2StructArch.family: Pix2StructArch,
    Qwen2VLArch.family: Qwen2VLArch,
    Qwen25VLArch.family: Qwen25VLArch,
    VideoNevaArch.family: VideoNevaArch,
    VilaArch.family: VilaArch,
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
    "Blip2OptArch",
    "Blip2T5Arch",
    "CogVLMArch",
    "FuyuArch",
    "InternLMXComposer2Arch",
    "Kosmos2Arch",
    "LlavaArch",
    "LlavaNextArch",
    "LlavaOnevisionArch",
    "MediaFeatures",
    "MllamaArch",
    "NevaArch",
    "NougatArch",
    "Phi3VisionArch",
    "Pix2StructArch",
    "Qwen2VLArch",
    "Qwen25VLArch",
    "VideoNevaArch",
    "VilaArch",
    "WhisperArch",
    "get_arch",
]
