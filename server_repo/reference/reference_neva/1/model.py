"""Triton entry point for reference_neva: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (the NeVA stand-in: SigLIP 384 + Llama, features at the
template's media marker),
responses out; all of it lives in ``server_repo.reference_kit.triton_model``, shared by every
reference model.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "neva"
