"""The filler substitutes known names and tells quoted leftovers (harmless) from bare ones."""

from __future__ import annotations

from server_repo.trtllm.fill import fill_template

TEMPLATE = """max_batch_size: ${triton_max_batch_size}
parameters: { key: "a" value: { string_value: "${engine_dir}" } }
parameters: { key: "b" value: { string_value: "${gpu_device_ids}" } }  # ${in_comment}
output [ { name: "x" data_type: ${logits_datatype} dims: [ -1 ] } ]
"""


def test_fills_known_names_everywhere() -> None:
    filled = fill_template(TEMPLATE, {"triton_max_batch_size": "8", "engine_dir": "/e"})
    assert "max_batch_size: 8" in filled.text
    assert 'string_value: "/e"' in filled.text
    assert filled.used == {"triton_max_batch_size", "engine_dir"}


def test_classifies_leftovers() -> None:
    filled = fill_template(TEMPLATE, {"triton_max_batch_size": "8"})
    assert filled.left_quoted == {"engine_dir", "gpu_device_ids"}
    assert filled.left_bare == {"logits_datatype"}  # the comment's name is neither


def test_quote_inside_a_comment_does_not_hide_a_bare_name() -> None:
    text = 'dims: [ -1 ] # a "quoted" note\ndata_type: ${dtype}\n'
    assert fill_template(text, {}).left_bare == {"dtype"}


def test_unused_values_are_ignored() -> None:
    filled = fill_template("x: 1\n", {"unused": "y"})
    assert filled.text == "x: 1\n" and not filled.used
