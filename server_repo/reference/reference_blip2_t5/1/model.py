"""Triton entry point for reference_blip2_t5: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (BLIP-2 Flan-T5 (encoder-decoder) architecture), responses out;
all of it lives in
``server_repo.reference_kit.triton_model``, shared by every reference model.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "blip2_t5"
