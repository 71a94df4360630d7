"""The image mode of ``python -m bench overhead``: one request with one JPEG, both ways.

Through the gateway the JPEG travels as a ``data:`` URL in a chat message, and the gateway
decodes, preprocesses (LLaVA-1.5's CLIP 336), hashes and sends it. Straight to Triton over
gRPC the client sends what the gateway would have sent: the same fp16 ``image_input`` tensor
and ``prompt_table_extra_id``, made once, before the measured window, by the gateway's own
code (so the two paths carry identical tensors). The difference in time to first token is
what the gateway's media path costs a request.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np

from bench.media.inputs import photo_jpeg
from gateway.families.registry import get_family
from gateway.media.identity import ExtraIdRegistry
from gateway.media.image import DEFAULT_DRAFT_MARGIN, ImageLimits
from gateway.pipeline._media_jobs import image_digest_inputs, prepare_image

FAMILY = "llava"  # the family the bench gateway serves the fixture as (bench/stack.py)


@dataclass(frozen=True)
class ImageLoad:
    """One bench image: the JPEG the gateway gets and the tensors direct gRPC sends."""

    side: int
    jpeg: bytes
    tensor: np.ndarray  # fp16 [1, 1, 3, 336, 336]: [batch, images, C, H, W], as the gateway sends
    extra_id: int

    @property
    def data_url(self) -> str:
        return "data:image/jpeg;base64," + base64.b64encode(self.jpeg).decode()

    @property
    def profile(self) -> str:
        return f"image{self.side}"


def image_load(side: int, model: str) -> ImageLoad:
    """A ``side`` x ``side`` photo-like JPEG and what the gateway turns it into for ``model``
    (the served id: it is part of the content digest)."""
    family = get_family(FAMILY)
    jpeg = photo_jpeg(side, side, seed=side)
    digest = image_digest_inputs(model, family, f"draft={DEFAULT_DRAFT_MARGIN:g}")
    item = prepare_image(jpeg, ImageLimits(), family, DEFAULT_DRAFT_MARGIN, digest)
    assert item.digest is not None
    tensor = family.stack_images([item.array])
    extra_id = ExtraIdRegistry().extra_id(item.digest)
    assert extra_id is not None
    return ImageLoad(side, jpeg, np.ascontiguousarray(tensor), extra_id)
