"""End-to-end fixtures: the gateway served by uvicorn on loopback in front of the session's
real tritonserver, a loopback HTTP server that serves test images, and the browser (Debian's
Chromium driven by Playwright) for the chat page and ``/docs``."""

from __future__ import annotations

import io
import tempfile
import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from gateway.config import EmbeddedSettings, ServedModel, Settings
from gateway.triton.embedded import EmbeddedTriton
from tests.e2e.chromium import LAUNCH_ARGS, ensure_chromium
from tests.live_gateway import serving
from tests.server_repo.family_samples import lora_adapter


def make_image(seed: int, size: tuple[int, int] = (320, 240), fmt: str = "PNG") -> bytes:
    """A deterministic, non-trivial test image (gradients plus seeded noise)."""
    rng = np.random.default_rng(seed)
    width, height = size
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack(
        [(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)), (x + y) % 256], axis=-1
    ).astype(np.int32)
    pixels = np.clip(pixels + rng.integers(-40, 40, pixels.shape), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


@dataclass
class MediaServer:
    base_url: str
    files: dict[str, tuple[bytes, str]]
    hits: dict[str, int]

    def url(self, name: str) -> str:
        return f"{self.base_url}/{name}"


@pytest.fixture(scope="session")
def media_server() -> Iterator[MediaServer]:
    files: dict[str, tuple[bytes, str]] = {
        "red.png": (make_image(1), "image/png"),
        "blue.jpg": (make_image(2, (400, 300), "JPEG"), "image/jpeg"),
        "green.png": (make_image(3, (256, 256)), "image/png"),
        "not-an-image.png": (b"this is plain text, not a picture\n" * 20, "image/png"),
    }
    hits: dict[str, int] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            name = self.path.lstrip("/")
            hits[name] = hits.get(name, 0) + 1
            if name not in files:
                self.send_error(404)
                return
            body, content_type = files[name]
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield MediaServer(f"http://127.0.0.1:{server.server_address[1]}", files, hits)
    finally:
        server.shutdown()


# The other families' tiny reference models (server_repo/reference/reference_<family>).
REFERENCE_FAMILIES = (
    "blip2_opt",
    "blip2_t5",
    "llava_next",
    "mllama",
    "qwen2_vl",
    "kosmos2",
    "fuyu",
    "deplot",
    "nougat",
    "vila",
    "neva",
    "internlm_xcomposer2",
    "cogvlm",
    "phi3_vision",
)
# Reference families that take a video, not an image (their own e2e tests).
VIDEO_FAMILIES = ("video_neva",)
# Served-model options a reference deployment needs: reference_vila's preprocessing is built
# with max_num_images 4, which the model's max_images must state (docs/families.md).
REFERENCE_OPTIONS: dict[str, dict[str, int]] = {"vila": {"max_images": 4}}


LORA_TASK_ID = 1
LORA_SEED = 11


def write_lora_adapter() -> Path:
    """The adapter folder NVIDIA's hf_lora_convert.py would write, for the tiny InternLM stand-in
    (the guide's deployment takes the Partial-LoRA this way: seeds/004)."""
    folder = Path(tempfile.mkdtemp(prefix="mmgw-e2e-lora-"))
    weights, config = lora_adapter(LORA_SEED)
    np.save(folder / "model.lora_weights.npy", weights[np.newaxis])
    np.save(folder / "model.lora_config.npy", config[np.newaxis])
    return folder


def e2e_settings(triton: EmbeddedTriton) -> Settings:
    published = Path(triton.env["MMGW_REFERENCE_TOKENIZERS"])  # where the models wrote theirs
    models = [
        ServedModel(
            id="reference-llava",
            family="llava",
            triton_model="reference_llava",
            triton_url=triton.grpc_url,
            end_id="server",
            tokenizer=published / "reference_llava",
        ),
        # The same deployment served as a Qwen3-format reasoning model (test_reasoning_openai).
        ServedModel(
            id="reference-llava-reasoning",
            family="llava",
            triton_model="reference_llava",
            triton_url=triton.grpc_url,
            end_id="server",
            tokenizer=published / "reference_llava",
            reasoning_parser="qwen3",
        ),
        ServedModel(
            id="reference-llava-onevision",
            family="llava_onevision",
            triton_model="reference_llava_onevision",
            triton_url=triton.grpc_url,
            end_id="server",
        ),
    ]
    models += [
        ServedModel(
            id=f"reference-{family.replace('_', '-')}",
            family=family,
            triton_model=f"reference_{family}",
            triton_url=triton.grpc_url,
            end_id="server",
            pad_id="server",  # the tiny tokenizers' ids are not the real checkpoints'
            **REFERENCE_OPTIONS.get(family, {}),
        )
        for family in (*REFERENCE_FAMILIES, *VIDEO_FAMILIES)
    ]
    # NVIDIA's llmapi model: no family, the folder the reference model publishes.
    models.append(
        ServedModel(
            id="reference-qwen2.5-vl",
            triton_model="reference_qwen2_5_vl",
            triton_url=triton.grpc_url,
            tokenizer=published / "reference_qwen2_5_vl",
        )
    )
    models.append(
        ServedModel(
            id="reference-internlm-xcomposer2-lora",
            family="internlm_xcomposer2",
            triton_model="reference_internlm_xcomposer2",
            triton_url=triton.grpc_url,
            end_id="server",
            pad_id="server",
            lora={"task_id": LORA_TASK_ID, "weights_path": write_lora_adapter()},
        )
    )
    return Settings(
        models=models,
        embedded=EmbeddedSettings(enabled=False),
        unsafe_allow_private_media_urls_for_tests=True,
        # Stored responses (/v1/responses) in this run's own file, not the user's data folder.
        responses={"store_path": Path(tempfile.mkdtemp(prefix="mmgw-e2e-")) / "r.sqlite3"},
    )


@pytest.fixture(scope="session")
async def gateway_url(embedded_triton: EmbeddedTriton) -> AsyncIterator[str]:
    """The session's gateway in front of the session's Triton."""
    async with serving(e2e_settings(embedded_triton)) as url:
        yield url


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    path, reason = ensure_chromium()
    if path is None:
        warnings.warn(f"browser tests skipped: {reason}", stacklevel=1)
        pytest.skip(f"browser tests skipped: {reason}")
    return path


@pytest.fixture(scope="session")
async def browser(chromium_path: Path) -> AsyncIterator[Any]:
    """One Chromium for the session's browser tests (the chat page, ``/docs``)."""
    playwright_api = pytest.importorskip(
        "playwright.async_api", reason="playwright is not installed: pip install -e '.[dev]'"
    )
    async with playwright_api.async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=str(chromium_path), args=LAUNCH_ARGS)
        try:
            yield launched
        finally:
            await launched.close()
