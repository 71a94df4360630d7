"""Triton entry point for reference_whisper: the encoder-decoder ``tensorrt_llm`` contract.

Log-mel features and decoder prompt ids in, token ids out; all of it lives in
``server_repo.reference_kit.whisper_triton``.
"""

from server_repo.reference_kit.whisper_triton import WhisperDirectModel


class TritonPythonModel(WhisperDirectModel):
    pass
