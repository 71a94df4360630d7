"""API keys: when configured, every ``/v1/`` request needs ``Authorization: Bearer <key>``.

Keys are kept only as SHA-256 digests and compared in constant time, so neither memory
dumps nor timing reveal them. Health, metrics and the chat page stay open.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable

from gateway.errors import AuthenticationError
from gateway.observability.middleware import ASGIApp, Receive, Scope, Send


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class ApiKeyMiddleware:
    def __init__(self, app: ASGIApp, keys: Iterable[str]) -> None:
        self.app = app
        self._digests = tuple(_digest(k) for k in keys)

    def _authorised(self, header: str) -> bool:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        candidate = _digest(token.strip())
        # Compare against every key so the time taken does not depend on which matched.
        matches = [hmac.compare_digest(candidate, d) for d in self._digests]
        return any(matches)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._digests or scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers", [])).get(b"authorization", b"").decode("latin-1")
        if self._authorised(header):
            await self.app(scope, receive, send)
            return
        error = AuthenticationError(
            "missing or invalid API key; send 'Authorization: Bearer <key>'"
        )
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
