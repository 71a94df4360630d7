import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from gateway.cli import _parser, settings_from_args
from gateway.config import ServedModel, WhisperOptions, load_settings


def test_defaults_serve_the_embedded_reference_models() -> None:
    settings = load_settings()
    assert [m.id for m in settings.models] == [
        "reference-llava",
        "reference-llava-onevision",
        "reference-whisper",
    ]
    assert settings.needs_embedded
    assert (settings.server.host, settings.server.port) == ("127.0.0.1", 8000)
    assert not settings.unsafe_allow_private_media_urls_for_tests


def test_toml_then_environment_then_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "gw.toml"
    config.write_text(
        """
[server]
port = 9001
host = "0.0.0.0"

[limits]
max_images_per_request = 2

[[models]]
id = "llava-7b"
family = "llava"
triton_model = "ensemble"
triton_url = "triton:8001"
"""
    )
    monkeypatch.setenv("MMGW_SERVER__PORT", "9002")
    settings = load_settings(config)
    assert settings.server.port == 9002  # environment beats the file
    assert settings.server.host == "0.0.0.0"
    assert settings.limits.max_images_per_request == 2
    assert [m.triton_url for m in settings.models] == ["triton:8001"]
    assert not settings.needs_embedded


def test_duplicate_ids_and_unknown_keys_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[[models]]\nid="a"\nfamily="llava"\ntriton_model="x"\n' * 2)
    with pytest.raises(ValidationError, match="duplicate"):
        load_settings(config)
    config.write_text("[server]\nprot = 1\n")
    with pytest.raises(ValidationError):
        load_settings(config)


def test_cli_triton_url_disables_the_embedded_server() -> None:
    args = _parser().parse_args(["serve", "--triton-url", "10.0.0.5:8001", "--port", "8100"])
    settings = settings_from_args(args)
    assert all(m.triton_url == "10.0.0.5:8001" for m in settings.models)
    assert not settings.needs_embedded
    assert settings.server.port == 8100


def test_whisper_options_load_from_toml_and_belong_to_whisper(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", readme, flags=re.S) if "whisper" in b)
    config = tmp_path / "gateway.toml"
    config.write_text(block)
    whisper = load_settings(config).models[0].whisper
    assert whisper is not None and whisper.n_mels == 128 and whisper.max_sequence_tokens == 114
    with pytest.raises(ValueError, match="family 'whisper'"):
        ServedModel(id="x", family="llava", triton_model="m", whisper=WhisperOptions())
