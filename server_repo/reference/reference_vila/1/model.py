"""Triton entry point for reference_vila: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (the VILA-1.5 stand-in: SigLIP 384 + Llama, NVIDIA's VILA
prompt with ``max_num_images`` 4), responses out; all of it lives in
``server_repo.reference_kit.triton_model``, shared by every reference model.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "vila"
