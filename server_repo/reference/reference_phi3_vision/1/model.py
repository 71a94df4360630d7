"""Triton entry point for reference_phi3_vision: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (the Phi-3-vision stand-in: CLIP 336 crops + Llama, the runner's
HD feature transform), responses out; all of it lives in
``server_repo.reference_kit.triton_model``, shared by every reference model.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "phi3_vision"
