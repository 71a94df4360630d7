"""Triton entry point for reference_video_neva: a thin adapter over the reference kit.

Tensors in, ``ReferenceEngine`` (the Video-NeVA stand-in: CLIP 224 per frame + Llama, features
at the template's media marker),
responses out; all of it lives in ``server_repo.reference_kit.triton_model``, shared by every
reference model.
"""

from server_repo.reference_kit.triton_model import ReferenceTritonModel


class TritonPythonModel(ReferenceTritonModel):
    family = "video_neva"
