"""The end and pad ids a request carries: configured, the family's, or none ("server")."""

from __future__ import annotations

from gateway.config import ServedModel
from gateway.families.registry import get_family
from gateway.pipeline.generation import end_ids
from gateway.runtime import ServedRuntime


def served(family: str, **ids: object) -> ServedRuntime:
    config = ServedModel(id="m", family=family, triton_model="t", **ids)  # type: ignore[arg-type]
    return ServedRuntime(config, get_family(family), client=None)  # type: ignore[arg-type]


def test_the_familys_ids_unless_configured() -> None:
    assert end_ids(served("blip2_opt")) == (50118, 1)  # OPT's newline, as NVIDIA's runner ends
    assert end_ids(served("blip2_opt", end_id=2, pad_id=7)) == (2, 7)


def test_server_sends_neither_so_the_deployments_tokenizer_decides() -> None:
    """NVIDIA's preprocessing takes a missing PAD_ID from its tokenizer, and starts an
    encoder-decoder's decoder there (tensorrtllm_backend all_models/inflight_batcher_llm/
    preprocessing/1/model.py @c2e65b88d85255be30cf50440a91662abeb497dd)."""
    assert end_ids(served("blip2_t5", end_id="server", pad_id="server")) == (None, None)
    assert end_ids(served("blip2_t5", end_id="server")) == (None, 0)
