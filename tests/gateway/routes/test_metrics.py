"""GET /metrics: the app's own registry in Prometheus text format; off when disabled."""

from __future__ import annotations

import httpx

from gateway.app import create_app
from gateway.config import ObservabilitySettings, Settings


async def get(settings: Settings, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=create_app(settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        return await http.get(path)


async def test_metrics_are_served_in_prometheus_format() -> None:
    response = await get(Settings(), "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    for name in (
        "mmgw_requests_total",
        "mmgw_time_to_first_token_seconds",
        "mmgw_inter_token_seconds",
        "mmgw_media_seconds",
        "mmgw_in_flight_requests",
        "mmgw_kv_reuse_id_collisions_total",
        "mmgw_triton_restarts_total",
    ):
        assert name in response.text


async def test_metrics_can_be_switched_off() -> None:
    settings = Settings(observability=ObservabilitySettings(metrics=False))
    assert (await get(settings, "/metrics")).status_code == 404
