"""BLIP2-T5: BLIP2's prompt and pixels on an encoder-decoder engine: T5's ids, no KV-reuse
key, and the decoder left to start from its pad token."""

from __future__ import annotations

import numpy as np

from gateway.families.blip2_opt import Blip2Opt
from gateway.families.blip2_t5 import Blip2T5
from tests.gateway.families.contracts import conversation, ensemble, generation, sample_image, sent


def test_same_prompt_and_pixels_as_blip2_opt() -> None:
    chat = conversation(("user", "what is shown?", 1))
    assert Blip2T5().render(chat) == Blip2Opt().render(chat) == "Question: what is shown? Answer:"
    image = sample_image()
    np.testing.assert_array_equal(Blip2T5().prepare_image(image), Blip2Opt().prepare_image(image))


def test_wire_tensors_of_an_encoder_decoder() -> None:
    inputs = sent(
        generation("blip2_t5", conversation(("user", "q", 1)), [sample_image()]), ensemble()
    )
    assert inputs["end_id"][2].item() == 1 and inputs["pad_id"][2].item() == 0
    assert "prompt_table_extra_id" not in inputs  # enc-dec engines: no paged KV cache
    assert "decoder_text_input" not in inputs  # T5's decoder starts from pad, the default
    assert inputs["image_input"][1] == [1, 1, 3, 224, 224]
