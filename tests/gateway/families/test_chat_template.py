"""The model's own chat template, rendered as Hugging Face renders it, inside jinja2's sandbox:
the template and the client's messages cannot reach Python, and the output is capped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.errors import InvalidRequest
from gateway.families.chat_template import ChatTemplate, TemplateError

SIMPLE = (
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
USER = [{"role": "user", "content": "Hi"}]


def test_renders_messages_with_the_generation_prompt() -> None:
    assert ChatTemplate(SIMPLE).render(USER, 1000) == "<user>Hi</user><assistant>"


def test_message_text_is_data_not_template() -> None:
    text = "{{ 7 * 7 }} {% for x in range(10**9) %}x{% endfor %}"
    rendered = ChatTemplate(SIMPLE).render([{"role": "user", "content": text}], 1000)
    assert text in rendered


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ messages.__class__.__init__.__globals__ }}",
        "{% set x = messages.append({'role': 'x'}) %}",  # immutable: no mutation of the input
    ],
)
def test_sandbox_escapes_are_refused(source: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        ChatTemplate(source).render(USER, 1000)
    assert "sandbox" in refused.value.message or "refuses" in refused.value.message


def test_unsafe_attributes_read_as_nothing() -> None:
    source = "[{{ raise_exception.__globals__ }}][{{ messages.__class__ }}]"
    assert ChatTemplate(source).render(USER, 1000) == "[][]"


def test_a_prompt_past_the_cap_stops_rendering() -> None:
    loop = "{% for i in range(100000) %}{{ messages[0].content }}{% endfor %}"
    with pytest.raises(InvalidRequest) as refused:
        ChatTemplate(loop).render([{"role": "user", "content": "x" * 1000}], 50_000)
    assert refused.value.code == "context_length_exceeded"


def test_raise_exception_is_a_400_with_the_templates_words() -> None:
    source = "{{ raise_exception('Conversation roles must alternate') }}"
    with pytest.raises(InvalidRequest, match="Conversation roles must alternate"):
        ChatTemplate(source).render(USER, 1000)


def test_tojson_keeps_non_ascii_and_tools_are_passed() -> None:
    source = "{% for t in tools %}{{ t | tojson }}{% endfor %}{{ strftime_now('%Y') | length }}"
    tools = [{"type": "function", "function": {"name": "météo"}}]
    rendered = ChatTemplate(source).render(USER, 1000, tools)
    assert rendered == json.dumps(tools[0], ensure_ascii=False) + "4"


def test_which_variables_the_template_reads() -> None:
    template = ChatTemplate("{% if enable_thinking %}t{% endif %}{{ tools }}")
    assert template.reads("tools") and template.thinking_switch == "enable_thinking"
    assert ChatTemplate(SIMPLE).thinking_switch is None


def test_load_reads_tokenizer_config_a_named_list_and_chat_template_jinja(tmp_path: Path) -> None:
    named = [{"name": "default", "template": SIMPLE}, {"name": "tool_use", "template": "T"}]
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": named, "bos_token": {"content": "<s>"}})
    )
    template = ChatTemplate.load(tmp_path)
    assert template.render(USER, 100) == "<user>Hi</user><assistant>"
    assert template.render(USER, 100, [{"type": "function"}]) == "T"
    assert template.special == {"bos_token": "<s>"}
    other = tmp_path / "other"
    other.mkdir()
    (other / "chat_template.jinja").write_text("{{ messages[0].content }}")
    assert ChatTemplate.load(other).render(USER, 100) == "Hi"


def test_a_folder_without_a_template_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(TemplateError, match="no chat template"):
        ChatTemplate.load(tmp_path)
    with pytest.raises(TemplateError, match="does not compile"):
        ChatTemplate("{% for %}")


def test_a_templates_python_error_is_a_400_not_a_crash() -> None:
    source = "{{ messages[0].content + '!' }}"
    with pytest.raises(InvalidRequest, match="cannot render this conversation"):
        ChatTemplate(source).render([{"role": "user", "content": [{"type": "image"}]}], 100)
    with pytest.raises(InvalidRequest, match="cannot render"):
        ChatTemplate("{{ (messages | length) // 0 }}").render(USER, 100)
