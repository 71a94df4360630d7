"""GET /v1/models and /v1/models/{id}: the served model ids, with each one's family and the
Triton server side it relies on (docs/families.md)."""

from __future__ import annotations

import time

from fastapi import APIRouter

from gateway.protocol.common import ModelCard, ModelList
from gateway.routes import openapi
from gateway.routes.state import RuntimeDep
from gateway.runtime import ServedRuntime

router = APIRouter()
_CREATED = int(time.time())


def _card(served: ServedRuntime) -> ModelCard:
    return ModelCard(
        id=served.config.id,
        created=_CREATED,
        owned_by=served.config.owned_by,
        family=served.config.family,  # None: NVIDIA's llmapi model, served without one
        server_side=served.server_side(),
        contract=served.contract.kind if served.contract is not None else None,
    )


@router.get("/v1/models", responses=openapi.errors(401, 429, 500))
async def list_models(runtime: RuntimeDep) -> ModelList:
    return ModelList(data=[_card(s) for s in runtime.models.values()])


@router.get("/v1/models/{model_id:path}", responses=openapi.errors(401, 404, 429, 500))
async def get_model(model_id: str, runtime: RuntimeDep) -> ModelCard:
    return _card(runtime.model(model_id))
