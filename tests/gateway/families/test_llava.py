import numpy as np
import pytest
from PIL import Image

from gateway.errors import InvalidRequest
from gateway.families.base import Conversation, Turn, max_multimodal_len
from gateway.families.llava import Llava


def conv(*turns: tuple[str, str], system: str | None = None) -> Conversation:
    return Conversation(system=system, turns=tuple(Turn(role=r, text=t) for r, t in turns))  # type: ignore[arg-type]


def test_single_question_is_sent_bare_because_the_server_adds_the_template() -> None:
    assert Llava().render(conv(("user", "What is this?"))) == "What is this?"


def test_system_and_earlier_turns_use_llava_15_separators() -> None:
    text = Llava().render(
        conv(("user", "Hi"), ("assistant", "Hello."), ("user", "Colour?"), system="Be brief.")
    )
    # The server wraps this as "USER:\n<features>" + text + " ASSISTANT:".
    assert text == "Be brief.\nHi ASSISTANT: Hello.</s>USER: Colour?"


def test_last_turn_must_be_the_user() -> None:
    with pytest.raises(InvalidRequest, match="last message"):
        Llava().render(conv(("user", "Hi"), ("assistant", "Hello")))


def test_image_marker_in_user_text_is_refused() -> None:
    with pytest.raises(InvalidRequest) as info:
        Llava().check_text(conv(("user", "see <image>")))
    assert info.value.code == "reserved_marker"


def test_pixels_are_fp16_clip_336_batches() -> None:
    family = Llava()
    images = [Image.new("RGB", (640, 480), (255, 0, 0)), Image.new("RGB", (200, 300), (0, 0, 255))]
    tensor = family.stack_images([family.prepare_image(i) for i in images])
    assert tensor.shape == (1, 2, 3, 336, 336)
    assert tensor.dtype == np.float16
    # Pure red normalised with CLIP's mean/std: R channel high, B channel low.
    assert tensor[0, 0, 0].mean() > 1.5 and tensor[0, 0, 2].mean() < -1.0
    assert tensor[0, 1, 2].mean() > 1.5


def test_engine_size_rule() -> None:
    assert max_multimodal_len(8, Llava.features_per_image, 1) == 4608
    assert max_multimodal_len(8, 196, 4) == 6272
    with pytest.raises(ValueError):
        max_multimodal_len(0, 576, 1)
