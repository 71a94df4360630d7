"""Schema fuzzing of every endpoint: schemathesis generates requests from the app's own
``/openapi.json`` (valid ones and ones the schema forbids), sends them through the real app over
the fake Triton, in-process, and no answer may be a 5xx; every non-2xx body is exactly one
OpenAI error object, and every status and body is one the schema declares.

Deterministic (``derandomize``) and bounded: about 40 s on a small machine. The gateway runs
on an event loop of its own in a thread: schemathesis' strategies are driven by a synchronous
hypothesis test, and each request is handed to that loop.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.audio_samples import encode, speech_like
from tests.fakes.app import FakeGateway, data_url, png, served_models, start_gateway
from tests.fakes.triton import FakeTriton

T = TypeVar("T")

# Every operation the schema has; a new endpoint fails test_every_operation_is_fuzzed until
# it is added here (with its number of examples per generation mode).
OPERATIONS = {
    ("POST", "/v1/chat/completions"): 500,
    ("POST", "/v1/completions"): 150,
    ("POST", "/v1/responses"): 100,
    ("GET", "/v1/responses/{response_id}"): 10,
    ("DELETE", "/v1/responses/{response_id}"): 10,
    ("GET", "/v1/responses/{response_id}/input_items"): 20,
    ("POST", "/v1/responses/input_tokens"): 40,
    ("POST", "/v1/responses/{response_id}/cancel"): 10,
    ("POST", "/v1/conversations"): 30,
    ("GET", "/v1/conversations/{conversation_id}"): 10,
    ("POST", "/v1/conversations/{conversation_id}"): 10,
    ("DELETE", "/v1/conversations/{conversation_id}"): 10,
    ("GET", "/v1/conversations/{conversation_id}/items"): 10,
    ("POST", "/v1/conversations/{conversation_id}/items"): 20,
    ("GET", "/v1/conversations/{conversation_id}/items/{item_id}"): 10,
    ("DELETE", "/v1/conversations/{conversation_id}/items/{item_id}"): 10,
    ("POST", "/v1/audio/transcriptions"): 150,
    ("POST", "/v1/audio/translations"): 100,
    ("GET", "/v1/models"): 10,
    ("GET", "/v1/models/{model_id}"): 50,
    ("GET", "/health"): 5,
    ("GET", "/health/live"): 5,
    ("GET", "/version"): 5,
}
SERVED = [model.id for model in served_models("unused")]  # fake-llava first: the simplest
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


class LoopThread:
    """An event loop running in a thread of its own; ``run`` waits for a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Fuzzed:
    """The gateway under fuzzing, its schema as schemathesis loaded it, and a way to send a
    generated case."""

    def __init__(self) -> None:
        self.loop = LoopThread()
        # Media URLs to any other host are refused before a lookup (no DNS, no network): a
        # fuzzed URL must not make the run wait on a resolver.
        fetch = {"allowed_domains": ("allowed.invalid",), "total_timeout_s": 2}
        self.gateway: FakeGateway = self.loop.run(start_gateway(FakeTriton(), fetch=fetch))
        transport = httpx.ASGITransport(app=self.gateway.app)
        self.http = httpx.AsyncClient(transport=transport, base_url="http://gateway", timeout=30)
        document = self.loop.run(self.http.get("/openapi.json"))
        assert document.status_code == 200, document.text
        self.document: dict[str, Any] = document.json()
        self.schema = schemathesis.openapi.from_dict(self.document)

    def send(self, case: schemathesis.Case) -> httpx.Response:
        """The case as schemathesis would send it (its ``requests`` arguments, prepared to the
        byte), through the app on the gateway's loop."""
        kwargs = case.as_transport_kwargs(base_url="http://gateway")
        prepared = requests.Request(**kwargs).prepare()
        body = prepared.body.encode() if isinstance(prepared.body, str) else prepared.body
        request = self.http.request(
            prepared.method or "GET", prepared.url or "", headers=prepared.headers, content=body
        )
        return self.loop.run(request)

    def close(self) -> None:
        self.loop.run(self.http.aclose())
        self.loop.run(self.gateway.aclose())
        self.loop.close()


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Fuzzed]:
    built = Fuzzed()
    yield built
    built.close()


def assert_openai_error_body(response: httpx.Response) -> None:
    """A non-2xx answer is exactly ``{"error": {"message", "type", "param", "code"}}``."""
    assert response.headers.get("content-type", "").startswith("application/json"), response
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error, dict), body
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["type"], str) and error["type"], error
    assert error["param"] is None or isinstance(error["param"], str), error
    assert error["code"] is None or isinstance(error["code"], str), error


def test_every_operation_is_fuzzed(fuzzed: Fuzzed) -> None:
    operations = {
        (method.upper(), path) for path, item in fuzzed.document["paths"].items() for method in item
    }
    assert operations == set(OPERATIONS)


def test_the_schema_describes_the_request_bodies(fuzzed: Fuzzed) -> None:
    paths, schemas = fuzzed.document["paths"], fuzzed.document["components"]["schemas"]
    completions = paths["/v1/completions"]["post"]["requestBody"]["content"]["application/json"]
    assert completions["schema"] == {"$ref": "#/components/schemas/CompletionRequest"}
    chat = paths["/v1/chat/completions"]["post"]
    body = chat["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ChatCompletionRequest"}
    assert {"ChatCompletionRequest", "ChatMessage", "ImageURLPart"} <= set(schemas)
    assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    for path in ("/v1/audio/transcriptions", "/v1/audio/translations"):
        form = paths[path]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
        assert form == {"$ref": "#/components/schemas/TranscriptionForm"}
    form = schemas["TranscriptionForm"]
    assert form["properties"]["file"]["format"] == "binary" and "file" in form["required"]
    for path, item in paths.items():
        for operation in item.values():
            assert "422" not in operation["responses"], path  # validation errors answer 400
            if path.startswith("/v1/"):
                assert "401" in operation["responses"], path
    error = {"$ref": "#/components/schemas/ErrorResponse"}
    assert chat["responses"]["503"]["content"]["application/json"]["schema"] == error


def fuzz_params() -> list[Any]:
    """Each operation with valid data, and those that take a body with data the schema
    forbids too (an operation with nothing to get wrong has no invalid requests)."""
    params = []
    for method, path in OPERATIONS:
        modes = [GenerationMode.POSITIVE]
        if method == "POST" and not path.endswith("/cancel"):  # a body to get wrong
            modes.append(GenerationMode.NEGATIVE)
        for mode in modes:
            params.append(pytest.param(method, path, mode, id=f"{method} {path} {mode.value}"))
    return params


WAV = encode(speech_like(1.0), "wav")
MEDIA_URLS = [
    data_url(png(1)),
    data_url(WAV, "audio/wav"),
    data_url(b"not media at all", "image/png"),
    "data:image/png;base64,%%%",
    "https://fuzz.invalid/cat.png",  # refused before any lookup (not in allowed_domains)
    "http://127.0.0.1:1/x.png",  # refused too: loopback, and not in allowed_domains
    "file:///etc/passwd",
]


def messages() -> st.SearchStrategy[list[dict[str, Any]]]:
    """Conversations the gateway can take (a user turn, maybe a system prompt before it),
    with real and broken media: schemathesis alone rarely writes one that gets past the
    pipeline's checks."""
    url = st.sampled_from(MEDIA_URLS)
    audio = st.sampled_from([base64.b64encode(WAV).decode(), "", "@@not base64"])
    part = st.one_of(
        st.builds(lambda text: {"type": "text", "text": text}, st.text(min_size=1, max_size=30)),
        st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, url),
        st.builds(lambda u: {"type": "video_url", "video_url": {"url": u}}, url),
        st.builds(lambda u: {"type": "audio_url", "audio_url": {"url": u}}, url),
        st.builds(
            lambda data, fmt: {"type": "input_audio", "input_audio": {"data": data, "format": fmt}},
            audio,
            st.sampled_from(["wav", "mp3", "flac", "?"]),
        ),
    )
    content = st.one_of(st.text(min_size=1, max_size=30), st.lists(part, min_size=1, max_size=3))
    user = st.fixed_dictionaries({"role": st.just("user"), "content": content})
    system = st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "developer"]),
            "content": st.text(min_size=1, max_size=30),
        }
    )
    return st.builds(lambda first, last: [*first, last], st.lists(system, max_size=1), user)


def responses_input() -> st.SearchStrategy[Any]:
    """A Responses ``input``: a string, or the conversation above as input items."""
    kinds = {"text": "input_text", "image_url": "input_image", "input_audio": "input_audio"}

    def item(message: dict[str, Any]) -> dict[str, Any]:
        content = message["content"]
        if isinstance(content, str):
            return message
        parts = []
        for part in content:
            kind = kinds.get(part["type"], "input_file")
            if kind == "input_text":
                parts.append({"type": kind, "text": part["text"]})
            elif kind == "input_image":
                parts.append({"type": kind, "image_url": part["image_url"]["url"]})
            elif kind == "input_audio":
                parts.append({"type": kind, "input_audio": part["input_audio"]})
            else:
                parts.append({"type": kind, "file_data": part[part["type"]]["url"]})
        return {**message, "content": parts}

    return st.one_of(
        st.text(min_size=1, max_size=40),
        st.builds(lambda conversation: [item(m) for m in conversation], messages()),
    )


RESPONSES_REFUSED = (
    "tools", "tool_choice", "text", "background", "conversation", "truncation", "reasoning",
    "prompt", "max_tool_calls", "top_logprobs", "include", "previous_response_id",
)  # fmt: skip


# Fields the gateway refuses by design (400 unsupported_parameter), and stop sequences (which
# must not be empty): a valid request often leaves them out, to get further.
REFUSED = (
    "n", "logprobs", "top_logprobs", "logit_bias", "tools", "tool_choice", "functions",
    "function_call", "modalities", "audio", "response_format", "stop", "lora_task_id",
)  # fmt: skip


MOSTLY = st.sampled_from([True, True, True, False])


def steer(case: schemathesis.Case, data: st.DataObject) -> None:
    """Point a valid request at what the gateway serves, so that it gets past model lookup
    and the pipeline's checks: a served model, mostly; for chat, often a well-formed
    conversation with media and no refused fields; for audio, often a real clip."""
    if case.path_parameters and "model_id" in case.path_parameters:
        original_id = case.path_parameters["model_id"]
        choice = data.draw(st.sampled_from([*SERVED, original_id]), "model id")
        case.path_parameters["model_id"] = choice
    body = case.body
    if not isinstance(body, dict):
        return
    original = body.get("model", "")
    if case.path == "/v1/completions":
        body["model"] = data.draw(st.sampled_from([*SERVED, original]), "model")
        if data.draw(MOSTLY, "text prompt"):
            body["prompt"] = data.draw(st.text(max_size=40), "prompt")
        for name in ("logprobs", "suffix", "best_of", "logit_bias"):
            body.pop(name, None)
        return
    if case.path in ("/v1/responses", "/v1/responses/input_tokens"):
        body["model"] = data.draw(st.sampled_from([*SERVED, original]), "model")
        if data.draw(MOSTLY, "own input"):
            body["input"] = data.draw(responses_input(), "input")
        if data.draw(MOSTLY, "leave out refused fields"):
            for name in RESPONSES_REFUSED:
                body.pop(name, None)
        return
    if case.path == "/v1/chat/completions":
        body["model"] = data.draw(st.sampled_from([*SERVED, original]), "model")
        if data.draw(MOSTLY, "own messages"):
            body["messages"] = data.draw(messages(), "messages")
        if data.draw(MOSTLY, "leave out refused fields"):
            for name in REFUSED:
                body.pop(name, None)
    elif case.path.startswith("/v1/audio/"):
        models = ["fake-whisper", "fake-whisper", "fake-llava", original]
        body["model"] = data.draw(st.sampled_from(models), "model")
        if data.draw(st.booleans(), "real clip"):
            body["file"] = WAV


# A value that overflows on its way into a Triton tensor only warns under NumPy 1 (it wraps,
# or becomes infinity) and raises under NumPy 2: either way a bug, so a failure here.
OVERFLOWS = (
    "error:NumPy will stop allowing conversion of out-of-bound:DeprecationWarning",
    "error:overflow encountered:RuntimeWarning",
)


@pytest.mark.filterwarnings(*OVERFLOWS)
@pytest.mark.parametrize(("method", "path", "mode"), fuzz_params())
def test_fuzz(fuzzed: Fuzzed, method: str, path: str, mode: GenerationMode) -> None:
    operation = fuzzed.schema[path][method]
    checks = [*CHECKS, negative_data_rejection] if mode is GenerationMode.NEGATIVE else CHECKS

    @settings(
        max_examples=OPERATIONS[method, path],
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode), data=st.data())
    def fuzz(case: schemathesis.Case, data: st.DataObject) -> None:
        if mode is GenerationMode.POSITIVE:
            steer(case, data)
        response = fuzzed.send(case)
        assert response.status_code < 500, response.text
        if not 200 <= response.status_code < 300:
            assert_openai_error_body(response)
        case.validate_response(response, checks=checks)

    fuzz()


@pytest.mark.parametrize(
    ("field", "value"),
    [("top_k", 2**31), ("min_tokens", 2**31), ("repetition_penalty", 1e39)],
)
def test_what_the_fuzzer_found_values_that_overflow_a_tensor_are_refused(
    fuzzed: Fuzzed, field: str, value: float
) -> None:
    """Found by test_fuzz: these reached Triton's INT32/FP32 tensors wrapped or infinite."""
    body = {"model": "fake-llava", "messages": [{"role": "user", "content": "Hi"}], field: value}
    response = fuzzed.loop.run(fuzzed.http.post("/v1/chat/completions", json=body))
    assert response.status_code == 400, response.text
    assert_openai_error_body(response)
    assert response.json()["error"]["param"] == field
