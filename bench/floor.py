"""The floor: the least a Python relay on the gateway's own stack can do per streamed token.

Issue 28 asks for 25k relayed tokens per gateway CPU-second "or a profile that shows what
outside the gateway bounds it". This relay is that bound, measured the same way: the server
stack ``mmgw serve`` runs (uvicorn with httptools, uvloop when installed, one ``SO_REUSEPORT``
socket per worker process), the same upstream call (grpc.aio's unary-stream call on Triton's
``ModelStreamInfer``, one channel per worker) and one OpenAI chat chunk written per token;
and nothing else: no validation, tokenizer, template, middleware, stop strings, usage,
metrics or logs. What the gateway costs above it is the gateway's own code; what it costs is
the stack's (uvicorn, grpc.aio, the event loop, the kernel's loopback TCP).

    python -m bench.floor --port 8123 --triton 127.0.0.1:8001 --model loadgen_ensemble --workers 4

``bench overhead`` / ``bench gpu-goals`` start it themselves (mode ``floor``). It takes the
load generator's request (``messages[-1].content`` a string, ``max_tokens``) and nothing else.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"
_DONE = b"data: [DONE]\n\n"
Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
Receive = Callable[[], Awaitable[Message]]


def infer_request(model: str, prompt: bytes, max_tokens: int, request_id: str) -> Any:
    """The load generator's three inputs (``bench/loadgen.py``), written straight into the
    protobuf: a BYTES element is its 4-byte little-endian length, then its bytes."""
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    for name, datatype, raw in (
        ("text_input", "BYTES", struct.pack("<I", len(prompt)) + prompt),
        ("max_tokens", "INT32", struct.pack("<i", max_tokens)),
        ("stream", "BOOL", b"\x01"),
    ):
        request.inputs.add(name=name, datatype=datatype, shape=[1, 1])
        request.raw_input_contents.append(raw)
    return request


def text_of(response: Any) -> str:
    """``text_output``'s first element (Triton puts raw outputs in declaration order)."""
    for index, output in enumerate(response.outputs):
        if output.name == "text_output":
            raw = response.raw_output_contents[index]
            (size,) = struct.unpack_from("<I", raw)
            return raw[4 : 4 + size].decode("utf-8", "replace")
    return ""


class FloorRelay:
    """The ASGI app: /health, and any POST relayed as an OpenAI chat stream."""

    def __init__(self, triton: str, model: str) -> None:
        self.triton, self.model = triton, model
        self._call: Any = None

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["path"] == "/health":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
        else:
            await self._relay(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        import grpc
        from tritonclient.grpc import service_pb2

        channel = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                channel = grpc.aio.insecure_channel(self.triton)
                self._call = channel.unary_stream(
                    _METHOD,
                    request_serializer=service_pb2.ModelInferRequest.SerializeToString,
                    response_deserializer=service_pb2.ModelStreamInferResponse.FromString,
                )
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if channel is not None:
                    await channel.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _relay(self, receive: Receive, send: Send) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        asked = json.loads(body)
        prompt = str(asked["messages"][-1]["content"]).encode()
        request_id = uuid.uuid4().hex
        call = self._call(infer_request(self.model, prompt, int(asked["max_tokens"]), request_id))
        head = (
            f'data: {{"id":"chatcmpl-{request_id}","object":"chat.completion.chunk",'
            f'"created":{int(time.time())},"model":{json.dumps(asked.get("model", ""))},'
            '"choices":[{"index":0,"delta":{"content":'
        ).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
        try:
            async for response in call:
                text = json.dumps(text_of(response.infer_response)).encode()
                chunk = head + text + b'},"finish_reason":null}]}\n\n'
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            call.cancel()
        last = head[: -len(b'{"content":')] + b'{},"finish_reason":"stop"}]}\n\n'
        await send({"type": "http.response.body", "body": last + _DONE})


def serve_worker(fd: int, triton: str, model: str) -> None:
    """One worker on an inherited listening socket, as ``mmgw serve``'s workers run: the
    socket is handed over as itself (uvicorn's own ``fd=`` takes any descriptor for a Unix
    socket, and a TCP connection it serves as one gets no ``TCP_NODELAY``: Nagle's algorithm
    then holds a lone token back for the client's delayed ACK, about 40 ms)."""
    import socket

    import uvicorn

    loop = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
    config = uvicorn.Config(
        FloorRelay(triton, model), http="httptools", loop=loop, lifespan="on",
        log_level="warning", access_log=False,
    )  # fmt: skip
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=fd)])


def serve(port: int, triton: str, model: str, workers: int) -> int:
    """``workers`` processes, a ``SO_REUSEPORT`` socket each; SIGTERM stops them all."""
    from gateway.workers import listening_socket

    sockets = [listening_socket("127.0.0.1", port, reuse_port=True) for _ in range(workers)]
    base = [sys.executable, "-m", "bench.floor", "--port", str(port), "--triton", triton,
            "--model", model]  # fmt: skip
    children = [
        subprocess.Popen([*base, "--fd", str(sock.fileno())], pass_fds=(sock.fileno(),))
        for sock in sockets
    ]

    def stop(*_: object) -> None:
        for child in children:
            child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    codes = [child.wait() for child in children]
    return next((code for code in codes if code), 0)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--triton", required=True, help="Triton's gRPC host:port")
    parser.add_argument("--model", required=True, help="the Triton model (the load fixture)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)  # a worker's socket
    args = parser.parse_args()
    if args.fd is not None:
        serve_worker(args.fd, args.triton, args.model)
        return 0
    return serve(args.port, args.triton, args.model, args.workers)


if __name__ == "__main__":
    sys.exit(main())
