"""The README's curl example, run verbatim (only the port changed) against the gateway."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_curl_example() -> str:
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    curls = [b for b in blocks if b.lstrip().startswith("curl")]
    assert curls, "the README must show a curl example"
    return curls[0]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_readme_curl_with_data_url_works(gateway_url: str) -> None:
    command = readme_curl_example().replace("http://127.0.0.1:8000", gateway_url)
    assert "data:image/png;base64," in command
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()
    body = json.loads(stdout)
    assert body["object"] == "chat.completion", body
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["usage"]["prompt_tokens"] > 576
