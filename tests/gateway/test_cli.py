"""``mmgw serve`` runs uvicorn on uvloop, with the gateway's own httptools protocol; a
configuration mistake ends in one ``mmgw: configuration error: ...`` line and exit 2."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.app import create_app
from gateway.cli import fast_server_options, main, uvicorn_options
from gateway.config import EmbeddedSettings, ServedModel, Settings
from gateway.config.environment import unknown_variables
from gateway.server import HttpLimits, LimitedHttpToolsProtocol


def test_serve_names_uvloop_when_installed() -> None:
    expected = {"loop": "uvloop"} if importlib.util.find_spec("uvloop") else {}
    assert fast_server_options() == expected
    assert expected == {"loop": "uvloop"}  # uvicorn[standard] has it


def test_serve_runs_the_bounded_httptools_protocol_with_the_settings_limits() -> None:
    settings = Settings(
        models=[ServedModel(id="m", family="llava", triton_model="e", triton_url="t:1")],
        embedded=EmbeddedSettings(enabled=False),
        server={"port": 9001, "max_headers": 40, "header_timeout_s": 3, "body_timeout_s": 7},
    )
    app = create_app(settings)
    options = uvicorn_options(settings, app, "warning")
    protocol = options.pop("http")
    assert issubclass(protocol, LimitedHttpToolsProtocol)
    assert issubclass(protocol, HttpToolsProtocol)
    assert protocol.limits == HttpLimits(40, 64 * 1024, 3.0, 7.0)
    assert protocol.report is not None and protocol.report.metrics is app.state.metrics
    assert options == {
        "host": "127.0.0.1",
        "port": 9001,
        "loop": "uvloop",
        "log_level": "warning",
        "log_config": None,
        "access_log": False,
        "timeout_graceful_shutdown": 30,
        "ws_max_size": 4 * 1024 * 1024 * 4 // 3 + 64 * 1024,  # a 4 MiB realtime append
    }


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``mmgw`` run with ``argv``: it must end with exit 2 and one clean configuration error."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "mmgw: configuration error: " in err, err
    for pydantic_report in ("Traceback", "validation error for", "[type=", "errors.pydantic.dev"):
        assert pydantic_report not in err, err
    return err


def test_a_misspelled_family_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(
        tmp_path,
        '[[models]]\nid = "m"\nfamily = "lava"\ntriton_model = "e"\ntriton_url = "t:1"\n',
    )
    err = refused(capsys, "serve", "--config", str(config))
    assert "models[0].family: unknown model family 'lava' (did you mean 'llava'?)" in err


def test_an_unknown_reasoning_parser_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = '[[models]]\nid = "m"\nfamily = "llava"\ntriton_model = "e"\ntriton_url = "t:1"\n'
    config = write(tmp_path, model + 'reasoning_parser = "qwen"\n')
    err = refused(capsys, "serve", "--config", str(config))
    assert "models[0].reasoning_parser: unknown reasoning_parser 'qwen'" in err, err
    assert "(did you mean 'qwen3'?); known: deepseek_r1, qwen3" in err


def test_a_model_the_embedded_triton_cannot_serve_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = '[[models]]\nid = "m"\nfamily = "llava"\ntriton_model = "mine"\n'
    err = refused(capsys, "serve", "--config", str(write(tmp_path, model)))
    assert "model 'm' has no triton_url" in err and "has no model 'mine'" in err

    off = "[embedded]\nenabled = false\n" + model
    err = refused(capsys, "serve", "--config", str(write(tmp_path, off)))
    assert "model 'm' has no triton_url, and the embedded Triton is disabled" in err


def test_a_bad_value_names_the_setting_and_what_was_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MMGW_SERVER__PORT", "eighty")
    err = refused(capsys, "serve")
    assert "server.port: Input should be a valid integer" in err and "'eighty'" in err


def without_mmgw_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.upper().startswith("MMGW_")]:
        monkeypatch.delenv(name)


def test_every_mmgw_variable_that_sets_nothing_is_warned_about(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    without_mmgw_variables(monkeypatch)
    monkeypatch.setenv("MMGW_SERVER_PORT", "9000")  # one underscore: sets nothing
    monkeypatch.setenv("MMGW_EMBEDED__DEVICE", "cpu")
    monkeypatch.setenv("MMGW_SERVER__PORT", "bad")  # stop before serving
    # Real settings, and the variables others read, are not warned about.
    monkeypatch.setenv("MMGW_EMBEDDED__CHECKPOINTS__REFERENCE_LLAVA", "/ckpt")
    monkeypatch.setenv("MMGW_MEDIA__IMAGE__MAX_PIXELS", "1000")
    monkeypatch.setenv("MMGW_REFERENCE_DEVICE", "cpu")
    monkeypatch.setenv("MMGW_LIMITS__MAX_MEDIA_BYTES", "1000")
    err = refused(capsys, "serve")
    warnings = [line for line in err.splitlines() if line.startswith("mmgw: warning: ")]
    assert warnings == [
        "mmgw: warning: MMGW_EMBEDED__DEVICE sets no setting and is ignored "
        "(did you mean MMGW_EMBEDDED__DEVICE?)",
        "mmgw: warning: MMGW_SERVER_PORT sets no setting and is ignored "
        "(did you mean MMGW_SERVER__PORT?)",
    ]


def test_a_misspelled_nested_name_is_matched_to_the_real_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    without_mmgw_variables(monkeypatch)
    monkeypatch.setenv("MMGW_OBSERVABILITY__LOG_FROMAT", "text")
    assert unknown_variables(Settings, os.environ) == [
        "MMGW_OBSERVABILITY__LOG_FROMAT sets no setting and is ignored "
        "(did you mean MMGW_OBSERVABILITY__LOG_FORMAT?)"
    ]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert re.fullmatch(r"mmgw \d+\.\d+\S*\n", capsys.readouterr().out)


def test_the_installed_command_exits_2_without_a_traceback(tmp_path: Path) -> None:
    config = write(tmp_path, '[[models]]\nid = "m"\nfamily = "lava"\ntriton_model = "e"\n')
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("mmgw: configuration error: models[0].family:"), done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_tracing_without_its_exporter_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tracing on without the 'otel' extra ended in a traceback from create_app."""
    import gateway.config.settings as settings_module

    monkeypatch.setattr(settings_module, "_installed", lambda module: False)
    monkeypatch.setenv("MMGW_OBSERVABILITY__TRACING", "true")
    err = refused(capsys, "serve")
    assert "observability.tracing: " in err and "multimodal-gateway[otel]" in err


def test_an_llmapi_model_without_a_usable_tokenizer_folder_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = '[[models]]\nid = "m"\ntriton_model = "tensorrt_llm"\ntriton_url = "t:1"\n'
    err = refused(capsys, "serve", "--config", str(write(tmp_path, model)))
    assert "model 'm' names no family" in err and "tokenizer" in err

    empty = tmp_path / "qwen"
    empty.mkdir()
    with_folder = model + f'tokenizer = "{empty}"\n'
    err = refused(capsys, "serve", "--config", str(write(tmp_path, with_folder)))
    assert "has no chat template" in err


def test_the_gateway_starts_without_loading_the_repository_assembler() -> None:
    """``server_repo.trtllm`` is loaded by ``mmgw trtllm-repo`` alone, not by ``import
    gateway.cli`` (every gateway worker's start-up)."""
    code = "import sys, gateway.cli; print(any(m.startswith('server_repo') for m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "False"


def test_trtllm_repo_still_takes_its_own_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["trtllm-repo", "--help"])
    assert exit_.value.code == 0
    assert "--backend" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--backend", "llmapi"])  # a trtllm-repo argument is not serve's
    assert exit_.value.code == 2
