"""``mmgw serve`` as a user starts it: a clean start-up (Triton's own output kept out,
progress while the models load, one ready line naming the URL, the chat page and the models)
and a failed one (the lines of Triton's output that say why, no traceback of the gateway's).

Each test runs the real command in a subprocess over the embedded Triton, serving one model
(one reference model, or one that cannot load) so the start stays short.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from gateway.triton.embedded import free_loopback_port
from gateway.triton.embedded.output import NOISE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(
    r"^ready: (http://127\.0\.0\.1:\d+) \(chat page \1/, API \1/v1, docs \1/docs\); "
    r"models: (.+)$"
)


def launch(config: Path, port: int, tmp_path: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMGW_")}
    env["MMGW_EMBEDDED__CACHE_DIR"] = str(tmp_path / "cache")
    command = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config)]
    return subprocess.Popen(
        [*command, "--port", str(port), "--device", "cpu"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def messages(stderr: str) -> list[str]:
    """Every line must be one of the gateway's JSON log lines: nothing of Triton's."""
    lines = stderr.splitlines()
    for line in lines:
        assert line.startswith("{"), f"not a gateway log line: {line[:200]!r}\n{stderr[-3000:]}"
    return [json.loads(line)["msg"] for line in lines]


def test_a_clean_start_ends_in_one_ready_line(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        '[[models]]\nid = "reference-llava"\nfamily = "llava"\n'
        'triton_model = "reference_llava"\nend_id = "server"\n'
    )
    port = free_loopback_port()
    gateway = launch(config, port, tmp_path)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and gateway.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["reference-llava"]
    finally:
        gateway.send_signal(signal.SIGINT)
        _, stderr = gateway.communicate(timeout=120)
    assert gateway.returncode == 0, stderr[-3000:]
    said = messages(stderr)
    ready = [i for i, m in enumerate(said) if m.startswith("ready: ")]
    assert len(ready) == 1, said
    match = READY.match(said[ready[0]])
    assert match, said[ready[0]]
    assert match.group(1) == f"http://127.0.0.1:{port}" and match.group(2) == "reference-llava"
    before = said[: ready[0]]
    assert before[0].startswith("starting tritonserver over "), before
    progress = [m for m in before if m.startswith("loading the embedded models: ")]
    assert progress and before == [before[0], *progress], before  # not 81 lines
    assert len(progress) <= 20, progress  # one per model loaded, or per 10 s of waiting
    assert not any(marker in stderr for marker in NOISE), stderr[-3000:]


def test_a_failed_start_says_why_in_tritons_words(tmp_path: Path) -> None:
    repository = tmp_path / "repository"
    model = repository / "broken"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'name: "broken"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "text_input" data_type: TYPE_STRING dims: [ 1 ] }]\n'
        'output [{ name: "text_output" data_type: TYPE_STRING dims: [ 1 ] }]\n'
    )
    # What issue 27's GPU machine saw: a model whose stub lacks a package.
    (model / "1" / "model.py").write_text("import mmgw_not_installed_anywhere\n")
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'[embedded]\nmodel_repository = "{repository}"\nstart_attempts = 1\n\n'
        '[[models]]\nid = "broken"\nfamily = "llava"\ntriton_model = "broken"\n'
    )
    gateway = launch(config, free_loopback_port(), tmp_path)
    _, stderr = gateway.communicate(timeout=300)
    assert gateway.returncode == 3, stderr[-3000:]
    said = messages(stderr)
    (failure,) = [m for m in said if m.startswith("mmgw could not start: ")]
    assert "tritonserver exited with code" in failure and "gave up after 1 attempt" in failure
    assert "No module named 'mmgw_not_installed_anywhere'" in failure, failure
    assert "broken" in failure
    # Triton's explanation, not the gateway's own traceback through the ASGI lifespan.
    assert "starlette" not in stderr and "StartupAborted" not in stderr, stderr[-3000:]
    assert not any(marker in failure for marker in NOISE), failure
