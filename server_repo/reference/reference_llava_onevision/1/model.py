"""Triton entry point for reference_llava_onevision: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (LLaVA-OneVision architecture, server-side image and video
preprocessing), responses out; the shared adapter is ``server_repo.reference_kit.triton_model``.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "llava_onevision"
