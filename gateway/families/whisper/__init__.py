"""Whisper speech recognition, as one family: prompt, windows, log-mel, tokens and both of
NVIDIA's Triton contracts (``whisper_bls`` and the encoder-decoder ``tensorrt_llm``)."""

from gateway.families.whisper.family import Whisper, WhisperSpec
from gateway.families.whisper.options import WhisperOptions

__all__ = ["Whisper", "WhisperOptions", "WhisperSpec"]
