"""NVIDIA's llmapi model as the gateway serves it: images as PNG data: URIs of the checked
pixels; the model folder's template and tokenizer."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors

from gateway.families.chat_template import TemplateError
from gateway.families.llmapi import IMAGE_URLS, LlmapiModel
from tests.fakes.llmapi_model import qwen3_folder


def test_an_image_becomes_a_lossless_png_data_uri_of_its_rgb_pixels() -> None:
    rgba = Image.new("RGBA", (5, 3), (10, 20, 30, 0))  # fully transparent: white, as HF does
    arrays = [IMAGE_URLS.prepare_image(rgba), IMAGE_URLS.prepare_image(Image.new("L", (2, 2)))]
    urls = IMAGE_URLS.stack_images(arrays)
    assert urls.shape == (2,) and urls.dtype == object
    prefix, payload = urls[0].decode().split(",", 1)
    assert prefix == "data:image/png;base64"
    image = Image.open(io.BytesIO(base64.b64decode(payload)))
    assert image.mode == "RGB" and np.asarray(image).tolist() == [[[255, 255, 255]] * 5] * 3
    assert IMAGE_URLS.image_tensor == "image_url"


def test_the_model_folder_gives_template_tokenizer_and_special_tokens() -> None:
    model = LlmapiModel.load(qwen3_folder())
    assert model.template.reads("tools")
    assert model.count("abc") == 3 and model.count("<|im_start|>a") == 2
    assert "<|im_start|>" in model.special_tokens
    assert model.added_bos is None


def test_a_bos_the_tokenizer_adds_itself_is_not_doubled(tmp_path: Path) -> None:
    tokenizer = Tokenizer(models.WordLevel({"<s>": 0, "hi": 1, "<unk>": 2}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens([AddedToken("<s>", special=True)])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 0)]
    )
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    config = {"chat_template": "{{ bos_token }}{{ messages[0].content }}", "bos_token": "<s>"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    model = LlmapiModel.load(tmp_path)
    rendered = model.template.render([{"role": "user", "content": "hi"}], 100)
    assert rendered == "<s>hi"
    assert model.prompt(rendered) == "hi"  # NVIDIA's model adds <s> when it tokenizes
    assert model.count(model.prompt(rendered), special=True) == 2


def test_a_folder_without_tokenizer_json_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    with pytest.raises(TemplateError, match="tokenizer"):
        LlmapiModel.load(tmp_path)
    with pytest.raises(TemplateError, match="does not exist"):
        LlmapiModel.load(tmp_path / "missing")
