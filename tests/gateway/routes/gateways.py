"""The gateways route tests talk to: the settings variants, each built once, on first use."""

from __future__ import annotations

from typing import Any

from tests.fakes.app import FakeGateway, start_gateway
from tests.fakes.triton import FakeTriton

API_KEY = "sk-route-tests"
OTHER_KEY = "sk-route-tests-other"
BODY_CAP = 4096  # server.max_body_bytes of the "guarded" gateway

VARIANTS: dict[str, dict[str, Any]] = {
    # The SSRF guard on, default limits.
    "default": {},
    # Media URLs may reach loopback: for the test's own HTTP servers on 127.0.0.1.
    "loopback": {"unsafe_allow_private_media_urls_for_tests": True},
    # Tight video, audio and decoding-time limits (the guard on).
    "strict": {
        "media": {"video": {"max_frames": 30}, "audio": {"max_duration_s": 1}},
        "decode": {"timeout_s": 0.25},
    },
    # Short upstream timeouts, for a Triton that goes silent.
    "impatient": {
        "upstream": {"first_token_timeout_s": 0.4, "token_timeout_s": 0.4, "request_timeout_s": 3}
    },
    # An API key, one request in flight, a small body cap.
    "guarded": {
        "api_keys": (API_KEY,),
        "server": {"max_in_flight": 1, "max_body_bytes": BODY_CAP},
    },
    # Two API keys (stored responses are each key's own), a small stored-response cap.
    "keyed": {"api_keys": (API_KEY, OTHER_KEY), "responses": {"max_stored_bytes": 64 * 1024}},
    # Structural guide limits out of the way, a short compile budget: the sandbox's own cases.
    "open_guides": {
        "guides": {
            "max_ref_depth": 10**6,
            "max_rules": 10**6,
            "max_bytes": 16 << 20,
            "max_regex_bytes": 16 << 20,
            "max_depth": 10**6,
            "compile_timeout_s": 3.0,
        },
    },
}


class Gateways:
    """One gateway per variant in front of the session's fake Triton, each built once (on
    first use)."""

    def __init__(self, fake: FakeTriton) -> None:
        self.fake = fake
        self.built: dict[str, FakeGateway] = {}

    async def get(self, variant: str = "default") -> FakeGateway:
        if variant not in self.built:
            self.built[variant] = await start_gateway(self.fake, **VARIANTS[variant])
        return self.built[variant]

    async def aclose(self) -> None:
        for gateway in self.built.values():
            await gateway.aclose()
