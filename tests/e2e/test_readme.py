"""Every example in README.md and docs/ runs as written against the embedded default.

The examples are discovered, not listed: every fenced block with a language in README.md and
docs/*.md. ``bash`` and ``python`` blocks run verbatim (only the port changed) from the
checkout's root against a gateway serving ``mmgw serve``'s default models on the session's
Triton; ``toml`` blocks must load as the gateway's settings. A block that cannot run here (a
GPU, a cluster, an external Triton, Prometheus) says so on the line before its fence:
``<!-- example: not run (why) -->``; the README's first two blocks are the install commands,
which CI runs itself.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.config import EmbeddedSettings, Settings, default_models, load_settings
from gateway.triton.embedded import EmbeddedTriton
from tests.live_gateway import serving

# The first example may pay for the session's Triton start on a loaded machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DEFAULT_URL = "http://127.0.0.1:8000"
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>\w+)\n(?P<body>.*?)^(?P=indent)```$", re.M | re.S)
NOT_RUN = re.compile(r"<!-- example: not run \((?P<why>[^)]+)\) -->\s*$")
RUNNABLE = {"bash", "python", "toml"}


@dataclass(frozen=True)
class Example:
    where: str  # "README.md:62"
    language: str
    code: str
    not_run: str | None  # why, for a block that cannot run here


def examples() -> list[Example]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text()
        bash_seen = 0
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            before = text[: match.start()].rstrip("\n ").rsplit("\n", 1)[-1]
            marked = NOT_RUN.search(before)
            why = marked.group("why") if marked else None
            language = match.group("lang")
            indent = len(match.group("indent"))
            code = "\n".join(row[indent:] for row in match.group("body").splitlines())
            if document.name == "README.md" and language == "bash" and not indent:
                bash_seen += 1
                if bash_seen <= 2:  # .ci/run takes the second verbatim
                    why = why or "the install commands: CI runs them"
            found.append(Example(f"{document.name}:{line}", language, code, why))
    return found


EXAMPLES = examples()
TO_RUN = [e for e in EXAMPLES if e.not_run is None]


def test_every_example_runs_or_says_why_it_cannot() -> None:
    assert len(TO_RUN) >= 8, [e.where for e in TO_RUN]
    for example in EXAMPLES:
        assert example.not_run is not None or example.language in RUNNABLE, (
            f"{example.where}: a {example.language} block runs nowhere here; mark it "
            "<!-- example: not run (why) -->"
        )
        assert "example.com" not in example.code or example.not_run, example.where


@pytest.fixture(scope="module")
async def default_gateway(
    embedded_triton: EmbeddedTriton, reference_cache: Path
) -> AsyncIterator[str]:
    """``mmgw serve``'s default models (what the examples name) on the session's Triton."""
    store = Path(tempfile.mkdtemp(prefix="mmgw-readme-")) / "responses.sqlite3"
    settings = Settings(
        models=default_models(),
        embedded=EmbeddedSettings(cache_dir=reference_cache),
        responses={"store_path": store},
    ).with_embedded_at(embedded_triton.grpc_url)
    async with serving(settings) as url:
        yield url


async def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    """In a thread: the gateway answering the example runs on this test's event loop."""
    return await asyncio.to_thread(
        subprocess.run, command, cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("example", TO_RUN, ids=[e.where for e in TO_RUN])
async def test_example(example: Example, default_gateway: str, tmp_path: Path) -> None:
    code = example.code.replace(DEFAULT_URL, default_gateway)
    if example.language == "toml":
        config = tmp_path / "gateway.toml"
        config.write_text(code)
        assert load_settings(config).models  # a valid configuration, as written
        return
    if example.language == "bash":
        if "curl " in code and shutil.which("curl") is None:
            pytest.skip("curl is not installed")
        done = await run(["bash", "-euo", "pipefail", "-c", code])
    else:
        done = await run([sys.executable, "-c", code])
    assert done.returncode == 0, f"{example.where}:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.strip(), f"{example.where} printed nothing"
    if example.language == "bash" and done.stdout.lstrip().startswith("{"):
        body = json.loads(done.stdout)  # a curl example prints the API's JSON answer
        assert "error" not in body, body
