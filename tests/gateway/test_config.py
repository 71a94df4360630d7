import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from gateway.cli import _parser, settings_from_args
from gateway.config import ServedModel, Settings, WhisperOptions, load_settings


def test_defaults_serve_the_embedded_reference_models() -> None:
    settings = load_settings()
    assert [m.id for m in settings.models] == [
        "reference-llava",
        "reference-llava-onevision",
        "reference-qwen2.5-vl",
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

[media]
max_images_per_request = 2

[media.video]
num_frames = 4

[decode]
workers = 3

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
    assert settings.media.max_images_per_request == 2
    assert settings.media.video.num_frames == 4 and settings.decode.workers == 3
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


def test_an_old_limits_table_still_loads_into_the_grouped_sections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "old.toml"
    config.write_text(
        "[limits]\nmax_media_bytes = 1024\nvideo_num_frames = 2\ndecode_workers = 5\n"
        'max_tokens_cap = 99\nallowed_domains = ["example.com"]\n'
    )
    with caplog.at_level("WARNING"):
        settings = load_settings(config)
    assert settings.media.max_bytes == 1024 and settings.media.video.num_frames == 2
    assert settings.decode.workers == 5 and settings.generation.max_tokens == 99
    assert settings.fetch.allowed_domains == ("example.com",)
    assert "limits.max_media_bytes is now media.max_bytes" in caplog.text
    monkeypatch.setenv("MMGW_LIMITS__MAX_IMAGES_PER_REQUEST", "3")
    assert Settings().media.max_images_per_request == 3  # the old variable too
    config.write_text("[limits]\nmax_bogus = 1\n")
    with pytest.raises(ValidationError, match=r"limits\.max_bogus"):
        load_settings(config)


def test_each_media_default_is_the_media_planes_own() -> None:
    from gateway.media import limits
    from gateway.media.fetch import FetchLimits
    from gateway.media.image import ImageLimits
    from gateway.media.offload import OffloadLimits
    from gateway.media.video import VideoLimits

    settings = Settings()
    assert settings.media.image_limits() == ImageLimits()
    assert settings.media.video_limits().max_bytes == VideoLimits().max_bytes
    assert settings.fetch.limits(settings.media.max_bytes) == FetchLimits()
    assert settings.decode.offload_limits() == OffloadLimits()
    assert settings.media.max_bytes == limits.DEFAULT_MAX_BYTES


def test_replicas_from_toml_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        '[[models]]\nid = "m"\nfamily = "llava"\ntriton_model = "ensemble"\n'
        'triton_url = ["triton-0.triton:8001", "triton-1.triton:8001"]\n'
        'routing = "least_loaded"\n'
    )
    monkeypatch.setenv("MMGW_EMBEDDED__REPLICAS", "3")
    settings = load_settings(config)
    assert settings.embedded.replicas == 3
    [model] = settings.models
    assert model.triton_target == "triton-0.triton:8001,triton-1.triton:8001"
    assert model.routing == "least_loaded" and model.spill_ratio == 1.5


def test_replica_targets_are_checked() -> None:
    one = ServedModel(id="m", family="llava", triton_model="e", triton_url=["a:1"])
    assert one.triton_url == "a:1"  # a list of one is one server
    two = ServedModel(id="m", family="llava", triton_model="e", triton_url="a:1, b:1")
    assert two.triton_url == ["a:1", "b:1"]  # as --triton-url takes them
    for wrong in ([], ["a:1", "a:1"], "dns:///no-port"):
        with pytest.raises(ValueError):
            ServedModel(id="m", family="llava", triton_model="e", triton_url=wrong)
    with pytest.raises(ValueError, match="must share routing"):
        Settings(
            models=[
                ServedModel(id="a", family="llava", triton_model="e", triton_url="t:1"),
                ServedModel(
                    id="b",
                    family="llava",
                    triton_model="e",
                    triton_url="t:1",
                    routing="round_robin",
                ),
            ]
        )


def test_the_decode_device_is_cpu_or_a_cuda_device_with_the_thread_lane(tmp_path: Path) -> None:
    from gateway.config.limits import DecodeSettings

    assert DecodeSettings().device == "cpu"
    assert DecodeSettings().offload_limits().threads.device == "cpu"
    for device in ("cuda", "cuda:0", "cuda:1"):
        assert DecodeSettings(device=device).device == device
    assert DecodeSettings(device="cuda:1").offload_limits().threads.device == "cuda:1"
    for wrong in ("gpu", "cuda:x", "cuda:", "CUDA", "cuda:1 ", "mps", ""):
        with pytest.raises(ValidationError, match="device"):
            DecodeSettings(device=wrong)
    # The device decodes in the thread lane: without threads it would never be used.
    with pytest.raises(ValidationError, match="threads"):
        DecodeSettings(device="cuda", threads=0)
    assert DecodeSettings(device="cpu", threads=0).offload_limits().threads.threads == 0
    config = tmp_path / "gw.toml"
    config.write_text('[decode]\ndevice = "cuda:1"\nthreads = 2\n')
    settings = load_settings(config)
    assert settings.decode.offload_limits().threads.device == "cuda:1"
    config.write_text('[decode]\ndevice = "cuda"\nthreads = 0\n')
    with pytest.raises(ValidationError, match="threads must be >= 1"):
        load_settings(config)


def test_the_loop_takes_small_images_up_to_the_configured_pixels() -> None:
    from gateway.config.limits import DecodeSettings

    assert DecodeSettings().offload_limits().threads.inline_max_pixels == 400 * 400
    lane = DecodeSettings(inline_max_pixels=0).offload_limits().threads
    assert lane.inline_max_pixels == 0
    with pytest.raises(ValidationError, match="inline_max_pixels"):
        DecodeSettings(inline_max_pixels=-1)
