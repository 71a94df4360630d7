"""Triton entry point for reference_llava_next: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (LLaVA-NeXT (Mistral) architecture), responses out;
all of it lives in
``server_repo.reference_kit.triton_model``, shared by every reference model.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "llava_next"
