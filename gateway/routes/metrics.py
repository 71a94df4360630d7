"""GET /metrics: the app's Prometheus registry in the text exposition format.

Left open like /health (the API-key check guards /v1/ only): scrapers rarely carry
bearer tokens, and the numbers hold no prompts. Put it behind the network policy instead.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from gateway.routes.state import MetricsDep

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(gateway_metrics: MetricsDep) -> Response:
    body, content_type = gateway_metrics.render()
    return Response(body, media_type=content_type)
