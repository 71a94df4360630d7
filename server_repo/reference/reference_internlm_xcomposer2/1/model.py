"""Triton entry point for reference_internlm_xcomposer2: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (the InternLM-XComposer2 stand-in: CLIP 490 + Llama, the guide's
``<ImageHere>`` split), responses out; all of it lives in
``server_repo.reference_kit.triton_model``, shared by every reference model.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "internlm_xcomposer2"
