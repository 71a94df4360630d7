"""The explicit family name -> Family table. Adding a family is one module plus one line."""

from __future__ import annotations

from pydantic import BaseModel

from gateway.families.base import Family
from gateway.families.blip2_opt import Blip2Opt
from gateway.families.blip2_t5 import Blip2T5
from gateway.families.cogvlm import CogVLM
from gateway.families.deplot import Deplot
from gateway.families.fuyu import Fuyu
from gateway.families.internlm_xcomposer2 import InternLMXComposer2
from gateway.families.kosmos2 import Kosmos2
from gateway.families.llava import Llava
from gateway.families.llava_next import LlavaNext
from gateway.families.llava_onevision import LlavaOnevision
from gateway.families.mllama import Mllama, MllamaBase
from gateway.families.neva import Neva
from gateway.families.nougat import Nougat
from gateway.families.phi3_vision import Phi3Vision
from gateway.families.qwen2_vl import Qwen2VL
from gateway.families.video_neva import VideoNeva
from gateway.families.vila import Vila
from gateway.families.whisper import Whisper

SUPPORTED_FAMILIES: dict[str, type[Family]] = {
    Blip2Opt.name: Blip2Opt,
    Blip2T5.name: Blip2T5,
    CogVLM.name: CogVLM,
    Deplot.name: Deplot,
    Fuyu.name: Fuyu,
    InternLMXComposer2.name: InternLMXComposer2,
    Kosmos2.name: Kosmos2,
    Llava.name: Llava,
    LlavaNext.name: LlavaNext,
    LlavaOnevision.name: LlavaOnevision,
    Mllama.name: Mllama,
    MllamaBase.name: MllamaBase,
    Neva.name: Neva,
    Nougat.name: Nougat,
    Phi3Vision.name: Phi3Vision,
    Qwen2VL.name: Qwen2VL,
    VideoNeva.name: VideoNeva,
    Vila.name: Vila,
    Whisper.name: Whisper,
}


def get_family(name: str, options: BaseModel | None = None) -> Family:
    """The family called ``name`` (with its own options table, for families that take one);
    a config naming an unknown one fails at start-up."""
    try:
        family = SUPPORTED_FAMILIES[name]
    except KeyError:
        known = ", ".join(sorted(SUPPORTED_FAMILIES))
        raise ValueError(f"unknown model family {name!r}; known: {known}") from None
    return family(options) if options is not None else family()
