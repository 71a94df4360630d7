"""Triton entry point for reference_whisper_bls: NVIDIA's ``whisper_bls`` contract.

16 kHz samples and a text prefix in, the transcript out (at most 50 new tokens); all of it
lives in ``server_repo.reference_kit.whisper_triton``.
"""

from server_repo.reference_kit.whisper_triton import WhisperBlsModel


class TritonPythonModel(WhisperBlsModel):
    pass
