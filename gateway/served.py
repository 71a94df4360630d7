"""One served model as a running gateway holds it: its settings, family, Triton backend,
the contract read from Triton (on first use if Triton was not up yet), its capabilities, its
tokenizer, and (NVIDIA's llmapi model) its chat template.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from gateway.config import GenerationPolicy, ServedModel, Settings
from gateway.families.base import Family
from gateway.families.capabilities import Capabilities
from gateway.families.chat_template import TemplateError
from gateway.families.llmapi import NVIDIA_LLMAPI, LlmapiModel
from gateway.families.vocabulary import Vocabulary
from gateway.triton.backend import TritonBackend
from gateway.triton.contract import ModelContract
from gateway.triton.lora import LoraLedger
from gateway.triton.readiness import ReadinessWatch

log = logging.getLogger(__name__)
# TensorRT-LLM's KvCacheConfig default tokens_per_block, for an llmapi model that sets none.
LLMAPI_TOKENS_PER_BLOCK = 32


class Models(Protocol):
    """Where the pipeline looks a served model up by the id a request names (the ``Runtime``
    is one): a 404 for an unknown id, a 503 while its Triton is down."""

    def model(self, model_id: str) -> ServedRuntime: ...


class DeploymentMismatch(ValueError):
    """A served model's settings do not fit the Triton model it names (a start-up error)."""


@dataclass
class ServedRuntime:
    """One served model: its settings, family, Triton client and discovered contract."""

    config: ServedModel
    family: Family
    client: TritonBackend
    contract: ModelContract | None = None
    # The engine's tokenizer (top_logprobs), from the config or published by the embedded model.
    tokenizer_path: Path | None = None
    _vocabulary: asyncio.Future[Vocabulary | None] | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # LoRA task ids this Triton model has had the weights of (shared by its served ids).
    lora: LoraLedger = field(default_factory=LoraLedger)
    # Its Triton's readiness (set by the Runtime): calls in flight hear when it is lost.
    readiness: ReadinessWatch | None = None
    # Served by NVIDIA's llmapi Triton model: its chat template and tokenizer (read with the
    # contract); None on the engine path.
    llmapi: LlmapiModel | None = None
    _capabilities: Capabilities | None = None
    # What its requests may ask and wait (``config/policy.py``); bound by the runtime that
    # serves it (``bind_policy``), else the default tables' own on first use.
    _policy: GenerationPolicy | None = None

    def bind_policy(self, settings: Settings) -> None:
        """Fix this model's generation policy: ``settings``' tables met with its entry."""
        generation, upstream = settings.generation, settings.upstream
        log_prompts = settings.observability.log_bodies
        self.use_policy(GenerationPolicy.of(self.config, generation, upstream, log_prompts))

    def use_policy(self, policy: GenerationPolicy) -> None:
        """Serve under ``policy`` (a test's own; a runtime binds its settings')."""
        self._policy = policy

    @property
    def policy(self) -> GenerationPolicy:
        """Its generation policy: the max_tokens cap and default, the prompt-size caps, the
        Triton timeouts, read by every request's preparation instead of the settings."""
        if self._policy is None:
            self._policy = GenerationPolicy.of(self.config)
        return self._policy

    def on_lost(self, lost: Callable[[], None]) -> Callable[[], None]:
        """Call ``lost()`` when this model's Triton loses its readiness; returns what stops
        listening."""
        if self.readiness is None:
            return lambda: None
        return self.readiness.listen(self.client.url, self.config.triton_model, lost)

    async def get_contract(self) -> ModelContract:
        if self.contract is None:
            async with self._lock:
                if self.contract is None:
                    contract = await self.client.contract(self.config.triton_model)
                    if contract.kind == "llmapi":
                        self.llmapi = await asyncio.to_thread(self._load_llmapi, contract)
                    else:
                        self._bind_engine(contract)
                    self.contract = contract
                    self._capabilities = self._capabilities_of(contract)
        return self.contract

    @property
    def capabilities(self) -> Capabilities:
        """What this model takes (``families/capabilities.py``), fixed once its contract is
        read; before that (a test seam without Triton), the family's and settings' own view,
        as if the deployment declared every input the family uses."""
        if self._capabilities is not None:
            return self._capabilities
        capabilities = self._capabilities_of(self.contract)
        if self.contract is not None:
            self._capabilities = capabilities
        return capabilities

    def _capabilities_of(self, contract: ModelContract | None) -> Capabilities:
        return Capabilities.of(
            self.config.id,
            self.family,
            triton_model=self.config.triton_model,
            contract=contract.kind if contract is not None else "engine",
            declares=contract.declares if contract is not None else lambda _: True,
            engine_max_images=self.config.max_images,
            image_dims=self._image_dims(contract),
        )

    def _image_dims(self, contract: ModelContract | None) -> tuple[int, ...] | None:
        """The dims the deployment declares for the family's image tensor (None: unknown)."""
        name = self.family.image_tensor
        spec = contract.inputs.get(name) if contract is not None and name else None
        return spec.dims if spec is not None else None

    def _bind_engine(self, contract: ModelContract) -> None:
        if self.config.family is None:
            raise DeploymentMismatch(
                f"model {self.config.id!r} names no family, and its Triton model "
                f"{contract.name!r} is not NVIDIA's llmapi model (it declares no "
                "'sampling_param_max_tokens'): set family to the model family it serves"
            )
        contract.require(self.family.required_inputs, "a TensorRT-LLM text contract")
        # A family with several contracts comes back holding the one it met; the instance
        # configured at start-up is not changed.
        self.family = self.family.bound(frozenset(contract.inputs), contract.name)
        self.family.check_deployment(contract.parameters, contract.name)

    def _load_llmapi(self, contract: ModelContract) -> LlmapiModel:
        """The chat template and tokenizer NVIDIA's llmapi model needs the gateway to hold (it
        takes finished prompts); a ``DeploymentMismatch`` naming the setting when they are not
        there."""
        where = (
            f"model {self.config.id!r} is served by NVIDIA's llmapi Triton model {contract.name!r}"
        )
        if self.tokenizer_path is None:
            raise DeploymentMismatch(
                f"{where}, which takes finished prompts: set tokenizer to the Hugging Face "
                "model folder (its chat template and tokenizer.json)"
            )
        try:
            return LlmapiModel.load(self.tokenizer_path)
        except TemplateError as exc:
            raise DeploymentMismatch(f"{where}: {exc}") from None

    def server_side(self) -> str:
        """The Triton server side this model relies on, for /v1/models."""
        if self.llmapi is not None:
            return NVIDIA_LLMAPI
        return self.family.server_side()

    async def vocabulary(self) -> Vocabulary | None:
        """The engine's vocabulary, read once (off the event loop); None when none is known
        or it cannot be read (logged)."""
        if self.tokenizer_path is None:
            return None
        if self._vocabulary is None:  # one load, shared by the requests that wait for it
            self._vocabulary = asyncio.ensure_future(self._load(self.tokenizer_path))
        return await asyncio.shield(self._vocabulary)

    async def _load(self, path: Path) -> Vocabulary | None:
        try:
            return await asyncio.to_thread(Vocabulary.load, path)
        except OSError as exc:
            log.warning("model %s: %s", self.config.id, exc)  # once: the verdict is kept
            return None

    @property
    def max_seq_len(self) -> int | None:
        """The engine's prompt + output limit: configured, else its Triton config's."""
        if self.config.max_seq_len:
            return self.config.max_seq_len
        return self.contract.int_parameter("max_seq_len") if self.contract else None

    @property
    def tokens_per_block(self) -> int | None:
        if self.config.kv_tokens_per_block:
            return self.config.kv_tokens_per_block
        if self.llmapi is not None:  # its config.pbtxt has no parameters; model.yaml's default
            return LLMAPI_TOKENS_PER_BLOCK
        return self.contract.int_parameter("tokens_per_block") if self.contract else None
