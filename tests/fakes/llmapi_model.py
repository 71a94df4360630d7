"""Hugging Face model folders for the fake llmapi deployments: a tokenizer and a chat template.

NVIDIA's llmapi model takes finished prompts, so a served model on it names the model's folder
(``tokenizer``): ``tokenizer.json`` and ``tokenizer_config.json`` with the ``chat_template``.
The tokenizer here is byte-level (one token per UTF-8 byte) with ChatML's special tokens added,
so a test can count a prompt's tokens by hand. Two templates: Qwen2.5-VL's as its checkpoints
ship it (no tools, no thinking switch), and a Qwen3-style one that renders tools (Hermes
``<tools>``), tool calls and results, and reads ``enable_thinking``. Written once per process
into temporary folders, removed at its exit.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

SPECIAL = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|image_pad|>",
)  # fmt: skip

QWEN3_TEMPLATE = (
    "{% if tools %}{{ '<|im_start|>system\\n' }}{% if messages[0].role == 'system' %}"
    "{{ messages[0].content + '\\n\\n' }}{% endif %}{{ '# Tools\\n<tools>\\n' }}"
    "{% for tool in tools %}{{ tool | tojson }}{{ '\\n' }}{% endfor %}"
    "{{ '</tools><|im_end|>\\n' }}"
    "{% elif messages[0].role == 'system' %}"
    "{{ '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{% endif %}"
    "{% for message in messages %}{% if message.role == 'system' %}{% continue %}{% endif %}"
    "{% if message.role == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message.content }}"
    "{{ '\\n</tool_response><|im_end|>\\n' }}"
    "{% else %}{{ '<|im_start|>' + message.role + '\\n' + message.content }}"
    "{% for call in message.tool_calls or [] %}{{ '\\n<tool_call>\\n' }}"
    '{{ \'{"name": "\' + call.function.name + \'", "arguments": \' }}'
    "{{ call.function.arguments | tojson }}{{ '}\\n</tool_call>' }}{% endfor %}"
    "{{ '<|im_end|>\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}{% endif %}"
)


def _tokenizer() -> Tokenizer:
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {char: index for index, char in enumerate(sorted(alphabet))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(token, special=True) for token in SPECIAL])
    return tokenizer


def _folder(template: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="fake-llmapi-model-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    _tokenizer().save(str(folder / "tokenizer.json"))
    config = {"chat_template": template, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


@functools.cache
def qwen3_folder() -> Path:
    """A Qwen3-style folder: tools and ``enable_thinking`` in its template."""
    return _folder(QWEN3_TEMPLATE)


@functools.cache
def qwen2_5_vl_folder() -> Path:
    """Qwen2.5-VL's template, as the reference model publishes it."""
    from server_repo.reference_kit.archs.qwen2_5_vl import CHAT_TEMPLATE

    return _folder(CHAT_TEMPLATE)
