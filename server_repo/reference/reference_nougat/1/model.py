"""Triton entry point for reference_nougat: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (Nougat: Swin + mBART, encoder-decoder), responses out;
all of it lives in
``server_repo.reference_kit.triton_model``, shared by every reference model.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "nougat"
