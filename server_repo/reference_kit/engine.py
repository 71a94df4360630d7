"""The in-process reference engine: a request in, per-token steps and statistics out.

``ReferenceEngine`` is what the Triton ``model.py`` adapters and the tests (including the
gateway's end-to-end comparison) share: it validates a ``GenerationRequest``, applies the
server-side template, computes visual features through the architecture, and drives the step
loop with the prefix cache. Triton tensors are not its business (``pb_tensors.py``).

    engine = load_engine("llava", cache_dir=None, checkpoint=None, device="cpu")
    generation = engine.generate(GenerationRequest(text_input="What is this?", images=pixels))
    text = "".join(step.text for step in generation)   # equals engine.decode(token ids)
    generation.stats.input_tokens, generation.stats.reused_blocks, ...

``normalize_log_probs`` is the engine-wide switch of TensorRT-LLM's ``tensorrt_llm`` model
parameter of that name (``sampling`` says what it changes); the kit's default is off.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from server_repo.reference_kit.archs import Arch, MediaFeatures, get_arch
from server_repo.reference_kit.generate import LanguageModel, StepInputs, StopRule, run_steps
from server_repo.reference_kit.guided import GrammarCache, GuidedMask
from server_repo.reference_kit.lora import LoraCache
from server_repo.reference_kit.prefix_cache import (
    DEFAULT_MAX_CACHED_TOKENS,
    DEFAULT_TOKENS_PER_BLOCK,
    PrefixCache,
)
from server_repo.reference_kit.request import (
    Completion,
    GenerationRequest,
    GenerationStats,
    InvalidRequest,
    Step,
)
from server_repo.reference_kit.sampling import Sampled, Sampler
from server_repo.reference_kit.templates import Prompt
from server_repo.reference_kit.weights import ModelAssets, load_assets


@dataclass(frozen=True)
class PreparedRequest:
    """A validated request turned into prompt ids and the full input embeddings."""

    request: GenerationRequest
    prompt: Prompt
    embeds: torch.Tensor
    end_id: int
    features: MediaFeatures = field(default_factory=MediaFeatures.empty)
    step_inputs: StepInputs | None = None
    guide: GuidedMask | None = None
    # The model the steps run: the loaded one, or a LoRA task's adapted copy (``lora.py``).
    model: PreTrainedModel | None = None


class Generation:
    """Iterator of ``Step``; ``stats`` is filled in as steps are produced."""

    def __init__(self, steps: Iterator[Step], stats: GenerationStats) -> None:
        self._steps = steps
        self.stats = stats

    def __iter__(self) -> Iterator[Step]:
        return self._steps

    def __next__(self) -> Step:
        return next(self._steps)


class ReferenceEngine:
    """One loaded reference model with its tokenizer, processor and prefix cache."""

    def __init__(
        self,
        arch: Arch,
        assets: ModelAssets,
        tokens_per_block: int = DEFAULT_TOKENS_PER_BLOCK,
        max_cached_tokens: int = DEFAULT_MAX_CACHED_TOKENS,
        normalize_log_probs: bool = False,
    ) -> None:
        self.arch = arch
        self.assets = assets
        self.normalize_log_probs = normalize_log_probs
        self.cache = PrefixCache(tokens_per_block, max_cached_tokens)
        text_config = assets.model.config.get_text_config(decoder=True)
        self.grammars = GrammarCache(assets.tokenizer, int(text_config.vocab_size))
        # Fast tokenizers are not safe to share across threads while encoding: serialise.
        self._tokenizer_lock = threading.Lock()
        self.adapters = LoraCache()

    @property
    def model(self) -> PreTrainedModel:
        return self.assets.model

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.assets.tokenizer

    @property
    def eos_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    @property
    def max_positions(self) -> int:
        return int(self.model.config.get_text_config(decoder=True).max_position_embeddings)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens (how stop/bad words are tokenized)."""
        with self._tokenizer_lock:
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, token_ids: list[int]) -> str:
        """Text of ``token_ids``, special tokens skipped (the ensemble's detokenizer)."""
        with self._tokenizer_lock:
            return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    @torch.inference_mode()
    def prepare(self, request: GenerationRequest) -> PreparedRequest:
        """Validate, render the template, compute visual features and the input embeddings."""
        request.validate()
        model = self.adapters.model_for(self.model, request)  # fails an uncached task id now
        features = self.arch.encode_request(self.model, self.assets.processor, request)
        with self._tokenizer_lock:
            prompt = self.arch.build_prompt(self.tokenizer, request.text_input, features.slots)
        if not prompt.token_ids:
            raise InvalidRequest(f"{self.arch.name} needs an image: its prompt is the image alone")
        request = replace(request, max_tokens=self.check_length(prompt, request))
        end_id = self.eos_token_id if request.end_id is None else int(request.end_id)
        # Computed now so that what it checks (Mllama's image markers) fails the request early.
        step_inputs = self.arch.step_inputs(self.model, prompt, features)
        embeds = self._embed(prompt, features)
        guide = self.guided_mask(request, end_id)
        return PreparedRequest(request, prompt, embeds, end_id, features, step_inputs, guide, model)

    def guided_mask(self, request: GenerationRequest, end_id: int) -> GuidedMask | None:
        """The request's grammar state (compiled or taken from the cache), None unguided."""
        if request.guide_type is None:
            return None
        matcher = self.grammars.matcher(request.guide_type, request.guide)
        return GuidedMask(matcher, end_id, self.eos_token_id)

    def check_length(self, prompt: Prompt, request: GenerationRequest) -> int:
        """The tokens this request may generate: ``max_tokens``, reduced to the positions the
        prompt leaves, as TensorRT-LLM reduces it to ``max_seq_len`` minus the prompt
        (NVIDIA/TensorRT-LLM cpp/tensorrt_llm/batch_manager/llmRequest.cpp,
        ``LlmRequest::validate``, commit 119c6e60e65e5ecec4e97afdb6ea584f674aed24: a warning,
        not an error); a prompt that leaves no room is refused."""
        room = self.max_positions - len(prompt)
        if room < 1:
            raise InvalidRequest(
                f"prompt ({len(prompt)} tokens) leaves no room in the model's "
                f"{self.max_positions} positions"
            )
        return min(request.max_tokens, room)

    def _embed(self, prompt: Prompt, features: MediaFeatures) -> torch.Tensor:
        """Text embeddings with the features spliced in; the features alone when the prompt is
        nothing else (their width may then differ from the text embeddings')."""
        if features.embeds is not None and all(prompt.media_mask):
            return features.embeds[None]
        ids = torch.tensor([prompt.token_ids], device=self.assets.device)
        embeds = self.model.get_input_embeddings()(ids)
        if features.embeds is not None:
            mask = torch.tensor(prompt.media_mask, device=self.assets.device)
            embeds[0, mask] = features.embeds.to(embeds.dtype)
        return embeds

    def generate(
        self, request: GenerationRequest, is_cancelled: Callable[[], bool] | None = None
    ) -> Generation:
        """Validate now (raising ``InvalidRequest``), then stream steps lazily."""
        return self.run(self.prepare(request), is_cancelled)

    def run(
        self, prepared: PreparedRequest, is_cancelled: Callable[[], bool] | None = None
    ) -> Generation:
        """Stream the steps of a request ``prepare`` has checked (its prompt is at hand, for
        a model that echoes it)."""
        stats = GenerationStats(self.cache.tokens_per_block, input_tokens=len(prepared.prompt))
        return Generation(self._steps(prepared, stats, is_cancelled), stats)

    def complete(self, request: GenerationRequest) -> Completion:
        """Run to the end; ``text`` is decoded at once, as a non-streamed response is."""
        generation = self.generate(request)
        steps = list(generation)
        ids = [step.token_id for step in steps]
        return Completion(self.decode(ids), ids, steps, generation.stats)

    def _steps(
        self,
        prepared: PreparedRequest,
        stats: GenerationStats,
        is_cancelled: Callable[[], bool] | None,
    ) -> Iterator[Step]:
        request = prepared.request
        sampler = Sampler(
            request,
            prepared.end_id,
            prepared.prompt.token_ids,
            [self.encode(word) for word in request.bad_words],
            self.assets.device,
            self.normalize_log_probs,
            prepared.guide,
        )
        stop = StopRule(
            prepared.end_id,
            tuple(tuple(self.encode(word)) for word in request.stop_words),
            request.max_tokens,
        )
        adapted = prepared.model is not None and prepared.model is not self.model
        lm = LanguageModel(
            self.arch.language_model(prepared.model or self.model),
            prepared.step_inputs,
            # The prefix cache keys blocks by tokens alone: an adapter's KV is its own.
            self.arch.reuse_prefix and not adapted,
        )
        tokens = run_steps(
            lm, prepared.embeds, prepared.prompt, self.cache,
            request.extra_id, sampler, stop, stats, is_cancelled,
        )  # fmt: skip
        yield from self._scored_steps(tokens)

    def _scored_steps(self, tokens: Iterator[Sampled]) -> Iterator[Step]:
        """Steps with their text, and the log probs and logits the request asked for."""
        cumulative = 0.0
        for sampled in tokens:
            step = Step(sampled.token, self.decode([sampled.token]))
            if sampled.full_log_prob is not None:
                cumulative += sampled.full_log_prob
                step = replace(step, log_prob=sampled.log_prob, cum_log_prob=cumulative)
            if sampled.logits is not None:
                step = replace(step, logits=sampled.logits.numpy())
            yield step


def load_engine(
    model_name: str,
    cache_dir: Path | str | None = None,
    checkpoint: str | None = None,
    device: str | None = None,
    tokens_per_block: int = DEFAULT_TOKENS_PER_BLOCK,
    max_cached_tokens: int = DEFAULT_MAX_CACHED_TOKENS,
    normalize_log_probs: bool = False,
) -> ReferenceEngine:
    """Load ``model_name`` ("llava", "llava_onevision" or their "reference_*" Triton names)."""
    arch = get_arch(model_name)
    assets = load_assets(arch, cache_dir=cache_dir, checkpoint=checkpoint, device=device)
    engine_class = ReferenceEngine
    if arch.encoder_decoder:
        from server_repo.reference_kit.seq2seq import Seq2SeqEngine  # it subclasses this one

        engine_class = Seq2SeqEngine
    return engine_class(arch, assets, tokens_per_block, max_cached_tokens, normalize_log_probs)
