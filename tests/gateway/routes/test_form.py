"""Reading a multipart upload: repeated fields, the file, the byte cap, wrong bodies."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from gateway.errors import GatewayError
from gateway.routes.form import read_form

CAP = 4096


def _app() -> FastAPI:
    app = FastAPI()

    @app.post("/upload")
    async def upload(request: Request) -> dict:
        form = await read_form(request, CAP)
        size = None if form.file is None else len(form.file)
        return {"fields": form.fields, "size": size, "name": form.filename}

    @app.exception_handler(GatewayError)
    async def errors(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, GatewayError)
        return JSONResponse(exc.to_body(), status_code=exc.status_code)

    return app


@pytest.fixture
async def http() -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


async def test_fields_repeated_fields_and_the_file(http: httpx.AsyncClient) -> None:
    data = {"model": "m", "timestamp_granularities[]": ["segment", "word"]}
    response = await http.post("/upload", data=data, files={"file": ("a.wav", b"RIFF1234")})
    assert response.json() == {
        "fields": {"model": "m", "timestamp_granularities": ["segment", "word"]},
        "size": 8,
        "name": "a.wav",
    }


async def test_a_body_over_the_cap_is_refused(http: httpx.AsyncClient) -> None:
    response = await http.post("/upload", files={"file": ("a.wav", bytes(CAP + 1))})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"json": {"model": "m"}}, "multipart/form-data"),
        ({"data": {"file": "not a file"}, "files": {"other": ("x", b"1")}}, "unexpected file"),
    ],
)
async def test_wrong_bodies_are_400s(http: httpx.AsyncClient, kwargs: dict, message: str) -> None:
    response = await http.post("/upload", **kwargs)
    assert response.status_code == 400 and message in response.json()["error"]["message"]


async def test_a_text_field_named_file_is_refused(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/upload", files={"file": (None, b"just text"), "model": (None, b"m")}
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "'file' must be a file upload"
