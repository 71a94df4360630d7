"""Triton entry point for reference_cogvlm: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (the CogVLM stand-in: CLIP 490 + Llama with CogVLM's position
ids), responses out; all of it lives in ``server_repo.reference_kit.triton_model``, shared by
every reference model.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "cogvlm"
