"""Triton entry point for reference_llava: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (LLaVA-1.5 architecture), responses out; all of it lives in
``server_repo.reference_kit.triton_model`` so both reference models share one adapter.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "llava"
