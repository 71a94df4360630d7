"""API keys: when configured, every ``/v1/`` request needs ``Authorization: Bearer <key>``
(a WebSocket may instead offer the key as OpenAI's browser subprotocol,
``openai-insecure-api-key.<key>``; a refused one gets its 401 before the upgrade).

Keys are kept only as SHA-256 digests and compared in constant time, so neither memory
dumps nor timing reveal them. Health, metrics and the chat page stay open. An authorised
request carries its key's identity (``key_id``: a digest of the digest, never the key) in its
scope's state, so what it stores (responses) is visible to the same key only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable

from gateway.errors import AuthenticationError
from gateway.observability.middleware import ASGIApp, Receive, Scope, Send

KEY_SUBPROTOCOL = "openai-insecure-api-key."


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def key_id(state: object) -> str:
    """The identity of the API key a request came with; "" when no keys are configured."""
    return str(getattr(state, "api_key_id", ""))


class ApiKeyMiddleware:
    def __init__(self, app: ASGIApp, keys: Iterable[str]) -> None:
        self.app = app
        self._digests = tuple(_digest(k) for k in keys)

    def _authorised(self, header: str) -> bytes | None:
        """The digest of the key the header carries, when it is one of ours."""
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        candidate = _digest(token.strip())
        # Compare against every key so the time taken does not depend on which matched.
        matches = [hmac.compare_digest(candidate, d) for d in self._digests]
        return candidate if any(matches) else None

    def _websocket_key(self, headers: dict[bytes, bytes]) -> bytes | None:
        """A WebSocket's key: the header, or (browsers cannot set headers) OpenAI's
        ``openai-insecure-api-key.<key>`` subprotocol."""
        digest = self._authorised(headers.get(b"authorization", b"").decode("latin-1"))
        if digest is not None:
            return digest
        offered = headers.get(b"sec-websocket-protocol", b"").decode("latin-1")
        for protocol in (p.strip() for p in offered.split(",")):
            if protocol.startswith(KEY_SUBPROTOCOL):
                return self._authorised("Bearer " + protocol[len(KEY_SUBPROTOCOL) :])
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if not self._digests or kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        if kind == "websocket":
            digest = self._websocket_key(headers)
        else:
            digest = self._authorised(headers.get(b"authorization", b"").decode("latin-1"))
        if digest is not None:
            identity = hashlib.sha256(b"mmgw-key-id:" + digest).hexdigest()[:32]
            scope.setdefault("state", {})["api_key_id"] = identity
            await self.app(scope, receive, send)
            return
        error = AuthenticationError(
            "missing or invalid API key; send 'Authorization: Bearer <key>'"
        )
        if kind == "websocket":
            await _refuse_websocket(scope, receive, send, error)
            return
        await send(
            {
                "type": "http.response.start",
                "status": error.status_code,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(error.to_body()).encode()})


async def _refuse_websocket(
    scope: Scope, receive: Receive, send: Send, error: AuthenticationError
) -> None:
    """401 instead of the upgrade (ASGI's denial response), or a close (1008) before
    accepting where the server cannot send one."""
    await receive()  # websocket.connect
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008, "reason": error.message[:120]})
        return
    await send(
        {
            "type": "websocket.http.response.start",
            "status": error.status_code,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
        }
    )
    body = json.dumps(error.to_body()).encode()
    await send({"type": "websocket.http.response.body", "body": body})
