"""The real gateway app in front of ``FakeTriton``, in-process, and ways to talk to it.

``start_gateway`` builds the app as ``mmgw serve`` does (``build_runtime`` then ``create_app``)
with every served model at the fake's URL, so no embedded Triton starts: ``connect`` hands the
runtime the fake instead of a gRPC client. ``http_client`` drives it with httpx for plain
requests (httpx's ASGI transport buffers whole responses and cannot leave early);
``AsgiCall`` is the client side of one connection, driven straight through ASGI: it sees each
body write as the server made it and can disconnect at any moment.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi import FastAPI
from PIL import Image

from gateway.app import create_app
from gateway.config import REFERENCE_WHISPER, EmbeddedSettings, ServedModel, Settings
from gateway.media.decoder import InProcessDecoder
from gateway.runtime import Runtime, build_runtime
from gateway.store import SqliteStore
from tests.fakes.llmapi_model import qwen2_5_vl_folder, qwen3_folder
from tests.fakes.triton import FakeTriton
from tests.fakes.vocabulary import tokenizer_file

STORE_PREFIX = "mmgw-test-store-"
TOKENS_PER_BLOCK = 64  # fake-onevision's kv_tokens_per_block (its config says 16)


def served_models(url: str) -> list[ServedModel]:
    """One served id per contract the fake holds (see ``tests.fakes.triton.default_configs``)."""
    return [
        ServedModel(
            id="fake-llava",
            family="llava",
            triton_model="ensemble",
            triton_url=url,
            tokenizer=tokenizer_file(),
        ),
        ServedModel(id="org/fake-llava", family="llava", triton_model="ensemble", triton_url=url),
        ServedModel(
            id="fake-onevision",
            family="llava_onevision",
            triton_model="ensemble_onevision",
            triton_url=url,
            kv_tokens_per_block=TOKENS_PER_BLOCK,
        ),
        ServedModel(
            id="fake-blip2", family="blip2_opt", triton_model="ensemble_blip2", triton_url=url
        ),
        ServedModel(
            id="fake-guided",
            family="llava_onevision",
            triton_model="ensemble_onevision",
            triton_url=url,
        ),
        ServedModel(
            id="fake-unguided",
            family="llava_onevision",
            triton_model="ensemble_unguided",
            triton_url=url,
        ),
        ServedModel(
            id="fake-guided-llama",
            family="mllama",
            triton_model="ensemble_onevision",
            triton_url=url,
        ),
        ServedModel(
            id="fake-minimal", family="llava", triton_model="ensemble_minimal", triton_url=url
        ),
        ServedModel(id="fake-unary", family="llava", triton_model="ensemble_unary", triton_url=url),
        # Reasoning models: DeepSeek-R1's format (its tokens counted one per streamed piece),
        # and Qwen3's on a deployment with the guide inputs and a tool-call format.
        ServedModel(
            id="fake-r1",
            family="llava",
            triton_model="ensemble",
            triton_url=url,
            reasoning_parser="deepseek_r1",
        ),
        ServedModel(
            id="fake-qwen3",
            family="llava_onevision",
            triton_model="ensemble_onevision",
            triton_url=url,
            reasoning_parser="qwen3",
        ),
        # NVIDIA's llmapi model: no family, the model folder's template and tokenizer.
        ServedModel(
            id="fake-llmapi", triton_model="llmapi", triton_url=url, tokenizer=qwen3_folder()
        ),
        # A Qwen3-class reasoning model on it: the template's thinking switch, the output split.
        ServedModel(
            id="fake-llmapi-qwen3",
            triton_model="llmapi",
            triton_url=url,
            tokenizer=qwen3_folder(),
            reasoning_parser="qwen3",
        ),
        ServedModel(
            id="fake-llmapi-hermes",
            family="qwen2_vl",  # the Hermes tool-call format
            triton_model="llmapi",
            triton_url=url,
            tokenizer=qwen3_folder(),
        ),
        ServedModel(
            id="fake-llmapi-vl",
            triton_model="llmapi",
            triton_url=url,
            tokenizer=qwen2_5_vl_folder(),
        ),
        ServedModel(
            id="fake-llmapi-unary",
            triton_model="llmapi_unary",
            triton_url=url,
            tokenizer=qwen3_folder(),
        ),
        ServedModel(
            id="fake-whisper",
            family="whisper",
            triton_model="whisper",
            triton_url=url,
            whisper=REFERENCE_WHISPER,
        ),
    ]


def fake_settings(fake: FakeTriton, **overrides: Any) -> Settings:
    """Settings serving ``served_models`` from ``fake``: no embedded Triton, the SSRF guard on,
    one media decoding worker (the test machine is small). ``overrides`` are Settings fields
    (sections as dicts of the fields to change)."""
    decode = {"workers": 1, **overrides.pop("decode", {})}
    # Stored responses in a folder of this gateway's own (removed by FakeGateway.aclose).
    store_path = Path(tempfile.mkdtemp(prefix=STORE_PREFIX)) / "responses.sqlite3"
    responses = {"store_path": store_path, **overrides.pop("responses", {})}
    return Settings(
        models=served_models(fake.url),
        embedded=EmbeddedSettings(enabled=False),
        decode=decode,
        responses=responses,
        **overrides,
    )


@dataclass
class FakeGateway:
    """The app, its runtime and the fake Triton behind it."""

    app: FastAPI
    runtime: Runtime
    fake: FakeTriton

    async def aclose(self) -> None:
        await self.runtime.aclose()
        store = self.runtime.store
        folder = store.path.parent if isinstance(store, SqliteStore) else None
        if folder is not None and folder.name.startswith(STORE_PREFIX):
            shutil.rmtree(folder, ignore_errors=True)


async def start_gateway(
    fake: FakeTriton, *, decode_processes: bool = False, **overrides: Any
) -> FakeGateway:
    """``build_runtime`` with ``connect`` answering the fake, then ``create_app``. Media is
    decoded on threads of this process (``InProcessDecoder``: no worker process to start);
    ``decode_processes``: by the worker processes ``mmgw serve`` runs."""
    settings = fake_settings(fake, **overrides)
    decoder = None if decode_processes else InProcessDecoder(settings.decode.offload_limits())

    def connect(url: str) -> FakeTriton:
        assert url == fake.url, url
        return fake

    runtime = await build_runtime(settings, connect=connect, decoder=decoder)  # type: ignore[arg-type]
    app = create_app(settings, runtime)
    # ASGI transports here run no lifespan; with a prebuilt runtime it would only do this.
    app.state.runtime = runtime
    return FakeGateway(app, runtime, fake)


@asynccontextmanager
async def http_client(app: FastAPI, **kwargs: Any) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway", **kwargs) as http:
        yield http


class AsgiCall:
    """One HTTP request through the ASGI app, from the client's side of the socket.

    ``chunks`` are the response body writes, one per ``http.response.body`` message, as the
    server sent them; ``disconnect()`` makes the next ``receive`` (the server's disconnect
    watcher) answer ``http.disconnect``, as a client closing its connection does.
    """

    def __init__(
        self,
        app: FastAPI,
        path: str,
        body: bytes | Mapping[str, Any] = b"",
        headers: Mapping[str, str] | None = None,
        method: str = "POST",
    ) -> None:
        self.app = app
        self.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        raw_headers = {"content-type": "application/json", **(headers or {})}
        raw_headers["content-length"] = str(len(self.body))
        self.scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in raw_headers.items()],
            "client": ("127.0.0.1", 50000), "server": ("gateway", 80), "state": {},
        }  # fmt: skip
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.finished = False  # the server sent its last body message
        self._sent_body = False
        self._left = asyncio.Event()
        self._wrote = asyncio.Condition()

    def disconnect(self) -> None:
        self._left.set()

    async def run(self) -> AsgiCall:
        await self.app(self.scope, self._receive, self._send)
        return self

    async def wait_chunks(self, count: int, timeout: float = 5.0) -> None:
        """Until the server has written ``count`` body chunks."""
        async with self._wrote:
            await asyncio.wait_for(self._wrote.wait_for(lambda: len(self.chunks) >= count), timeout)

    @property
    def text(self) -> str:
        return b"".join(self.chunks).decode()

    async def _receive(self) -> dict[str, Any]:
        if not self._sent_body:
            self._sent_body = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self._left.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            if message.get("body"):
                async with self._wrote:
                    self.chunks.append(message["body"])
                    self._wrote.notify_all()
            self.finished = not message.get("more_body", False)


_ERROR_TYPES = {401: "authentication_error", 429: "rate_limit_error"}
_CODE_TYPES = {"store_quota_exceeded": "insufficient_quota"}  # OpenAI's 429 for a quota


def assert_openai_error(
    response: httpx.Response, status: int, code: str | None = None
) -> dict[str, Any]:
    """The response is ``status`` with a body that is exactly one OpenAI error object."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    default_type = "invalid_request_error" if status < 500 else "server_error"
    expected = _CODE_TYPES.get(code or "") or _ERROR_TYPES.get(status, default_type)
    assert error["type"] == expected, error
    if code is not None:
        assert error["code"] == code, error
    return error


def png(seed: int = 0, size: tuple[int, int] = (64, 48), fmt: str = "PNG") -> bytes:
    """A deterministic noisy RGB image, encoded."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, fmt)
    return out.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def chat(
    content: str | list[dict[str, Any]] = "Hello?", model: str = "fake-llava", **fields: Any
) -> dict[str, Any]:
    """A chat-completion body with one user message."""
    return {"model": model, "messages": [{"role": "user", "content": content}], **fields}


def multipart(fields: Mapping[str, str], files: Mapping[str, Any]) -> tuple[bytes, dict[str, str]]:
    """A ``multipart/form-data`` body as httpx encodes it, and its content-type header."""
    request = httpx.Request("POST", "http://gateway", data=fields, files=files)
    return request.read(), {"content-type": request.headers["content-type"]}


def sse_payloads(text: str) -> list[Any]:
    """The ``data:`` payloads of an event stream, JSON-decoded (``[DONE]`` kept as a string);
    asserts every event is exactly one ``data: ...`` line followed by a blank line."""
    assert text.endswith("\n\n"), text[-80:]
    payloads: list[Any] = []
    for event in text[:-2].split("\n\n"):
        assert event.startswith("data: ") and "\n" not in event, event
        raw = event[len("data: ") :]
        payloads.append(raw if raw == "[DONE]" else json.loads(raw))
    return payloads
