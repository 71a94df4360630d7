"""Triton entry point for reference_qwen2_5_vl: NVIDIA's ``llmapi`` contract over the kit.

Tensors in, ``ReferenceEngine`` (Qwen2.5-VL architecture), responses out; all of it lives in
``server_repo.reference_kit.llmapi_triton``.
"""

from server_repo.reference_kit.llmapi_triton import LlmapiTritonModel


class TritonPythonModel(LlmapiTritonModel):
    family = "qwen2_5_vl"
