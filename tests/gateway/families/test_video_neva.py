"""Video-NeVA (contract only): frames as preprocessed images in ``image_input``, the SteerLM
template with the ``<video>`` slot, video required and images refused."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from gateway.errors import InvalidRequest
from gateway.families.base import Conversation, Turn, max_multimodal_len
from gateway.families.calls import GenerationRequest
from gateway.families.kosmos2 import Kosmos2
from gateway.families.video_neva import DEFAULT_SYSTEM, STEERLM, VideoNeva
from gateway.pipeline.media import PreparedMedia
from tests.gateway.families.contracts import ensemble, sent


def video_chat(text: str = "Hi! What is in this video?") -> Conversation:
    return Conversation(None, (Turn("user", text, videos=1),))


def frames(count: int = 4) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (count, 240, 320, 3), dtype=np.uint8)


def test_steerlm_template_with_the_video_slot() -> None:
    assert VideoNeva().render(video_chat()) == (
        f"<extra_id_0>System\n{DEFAULT_SYSTEM}\n\n<extra_id_1>User<video>\n"
        f"Hi! What is in this video?\n<extra_id_1>Assistant\n{STEERLM}"
    )


def test_a_video_is_required_and_images_are_not_taken() -> None:
    with pytest.raises(InvalidRequest, match="needs a video") as info:
        VideoNeva().check_conversation(Conversation(None, (Turn("user", "hi"),)))
    assert info.value.code == "video_required"
    # Images: no image tensor, so the media check refuses the part by name (not this check).
    VideoNeva().check_conversation(Conversation(None, (Turn("user", "hi", images=1),)))
    assert VideoNeva.image_tensor is None and VideoNeva.video_tensor == "image_input"


def test_frames_are_clip_224_images() -> None:
    clip = frames(3)
    prepared = VideoNeva().prepare_video(clip)
    assert prepared.shape == (3, 3, 224, 224)
    expected = Kosmos2().prepare_image(Image.fromarray(clip[1]))  # fp16: HF's values, cast
    np.testing.assert_array_equal(prepared[1].astype(np.float16), expected)


def test_wire_tensors_field_by_field() -> None:
    family = VideoNeva()
    video = family.stack_video(family.prepare_video(frames(4)))
    media = PreparedMedia(("image_input", video), 99, 1)
    request = GenerationRequest(
        text_input=family.render(video_chat()),
        max_tokens=8,
        images=media.tensor,
        prompt_table_extra_id=media.extra_id,
        stop_words=family.stop_strings,
    )
    inputs = sent(request, ensemble())
    assert inputs["image_input"][:2] == ("FP16", [1, 4, 3, 224, 224])
    assert inputs["text_input"][2][0].count("<video>") == 1
    assert inputs["stop_words"][2] == ["<extra_id_1>"]
    assert "video_bytes_input" not in inputs


def test_engine_size_for_eight_frames() -> None:
    assert max_multimodal_len(1, VideoNeva.features_per_image, 8) == 2048
