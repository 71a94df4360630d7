"""Served models: which OpenAI model id is which Triton model, of which family, where."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from gateway.config.limits import Strict
from gateway.families.chat_template import ChatTemplate
from gateway.families.reasoning import REASONING_PARSERS
from gateway.families.registry import SUPPORTED_FAMILIES
from gateway.families.whisper.options import WhisperOptions
from gateway.triton.replicas.discovery import is_dns, parse_dns

DEFAULT_MAX_TOKENS = None  # a request naming no limit runs to the engine's (or the server cap)


class LoraAdapter(Strict):
    """One LoRA adapter of a served model, as TensorRT-LLM's Triton backend takes it.

    ``weights_path`` is the folder NVIDIA's ``hf_lora_convert.py`` writes:
    ``model.lora_weights.npy`` (fp16, [1, modules x layers, size]) and
    ``model.lora_config.npy`` (int32, [1, modules x layers, 3]). The gateway sends both with
    the first request that uses ``task_id`` on a Triton model, and the id alone afterwards
    (the server caches the adapter).
    """

    task_id: int = Field(ge=1, le=2**64 - 1, description="lora_task_id (UINT64); 0 means none")
    weights_path: Path


class ServedModel(Strict):
    """One OpenAI model id and the Triton model that serves it."""

    id: str
    family: str | None = Field(
        None,
        description="the model family (families.md); optional on NVIDIA's llmapi Triton model, "
        "where it picks the tool-call format; required on the engine path",
    )
    triton_model: str
    triton_url: str | list[str] | None = Field(
        None,
        description="host:port of Triton's gRPC; a list of replicas; or 'dns:///name:port' "
        "(every address of a headless Service, re-resolved); None = embedded",
    )
    routing: Literal["affinity", "least_loaded", "round_robin"] | None = Field(
        None,
        description="how calls spread over several replicas; None: affinity (same image, same "
        "replica, for KV reuse)",
    )
    spill_ratio: float = Field(
        1.5,
        ge=1.0,
        description="affinity: a replica holding more than this times the mean in-flight load "
        "passes a request to the key's next choice",
    )
    spill_floor: int = Field(
        8,
        ge=1,
        description="affinity: in-flight calls a replica always takes before spilling (an "
        "in-flight batching engine serves several at once; spilling below that only loses reuse)",
    )
    max_images: int | None = Field(None, ge=0, description="engine's max images per request")
    max_image_tokens: int | None = Field(
        None,
        ge=1,
        description="the image tokens one request to this model may cost (over its images and "
        "PDF pages); refused with a 400 past it. None: [media] max_image_tokens_per_request",
    )
    default_max_tokens: int | None = Field(
        DEFAULT_MAX_TOKENS,
        ge=1,
        description="max_tokens sent when a request names none; unset: max_seq_len (the engine "
        "reduces it to what the prompt leaves), else [generation] max_tokens. Setting it cuts "
        "answers there (finish_reason 'length', status 'incomplete').",
    )
    max_seq_len: int | None = Field(
        None,
        ge=1,
        description="the engine's max_seq_len (prompt + output); read from the Triton model's "
        "'max_seq_len' parameter if unset",
    )
    max_input_tokens: int | None = Field(
        None,
        ge=1,
        description="the engine's max_input_len: a prompt longer than 32 characters per token "
        "allowed cannot fit, and is refused before Triton tokenises it",
    )
    kv_tokens_per_block: int | None = Field(
        None, ge=1, description="TRT-LLM tokens_per_block; read from the model config if unset"
    )
    streaming: Literal["delta", "cumulative"] = Field(
        "delta",
        description="'delta': each Triton response holds only new text (the ensemble); "
        "'cumulative': the full text so far (BLS with accumulate_tokens).",
    )
    end_id: int | Literal["server"] | None = Field(
        None,
        description="None: the family's known end id; 'server': send none, so the "
        "deployment's tokenizer EOS applies; or an explicit id (never -1).",
    )
    pad_id: int | Literal["server"] | None = Field(
        None,
        description="None: the family's known pad id; 'server': send none, so the "
        "deployment's tokenizer pad applies (it is also where NVIDIA's preprocessing starts "
        "an encoder-decoder's decoder); or an explicit id.",
    )
    tokenizer: Path | None = Field(
        None,
        description="The model's Hugging Face folder (tokenizer.json, tokenizer_config.json with "
        "its chat template). NVIDIA's llmapi Triton model needs it: the gateway renders the "
        "chat template and counts tokens with it. On the engine path it names the alternatives "
        "of top_logprobs (tokenizer.json alone will do). Embedded reference models publish theirs.",
    )
    reasoning_parser: str | None = Field(
        None,
        description="a reasoning model's output format, named as vLLM's --reasoning-parser: "
        "'deepseek_r1' (the output starts inside <think>: up to </think> is reasoning) or "
        "'qwen3' (an optional <think>...</think> block first); its reasoning goes out as "
        "reasoning_content / Responses reasoning items. None: the output is all answer.",
    )
    owned_by: str = "multimodal-gateway"
    lora: list[LoraAdapter] = Field(
        default_factory=list,
        description="LoRA adapters (one table or a list); the first applies when a request "
        "names none (request field 'lora_task_id'), as the InternLM-XComposer2 guide does.",
    )

    @field_validator("family")
    @classmethod
    def _known_family(cls, name: str | None) -> str | None:
        """Checked with the rest of the configuration, so a misspelling is a configuration
        error at start-up, not a failure after Triton has been launched."""
        if name is not None and name not in SUPPORTED_FAMILIES:
            close = difflib.get_close_matches(name, SUPPORTED_FAMILIES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            known = ", ".join(sorted(SUPPORTED_FAMILIES))
            raise ValueError(f"unknown model family {name!r}{hint}; known: {known}")
        return name

    @field_validator("reasoning_parser")
    @classmethod
    def _known_reasoning_parser(cls, name: str | None) -> str | None:
        if name is not None and name not in REASONING_PARSERS:
            close = difflib.get_close_matches(name, REASONING_PARSERS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            known = ", ".join(sorted(REASONING_PARSERS))
            raise ValueError(f"unknown reasoning_parser {name!r}{hint}; known: {known}")
        return name

    @field_validator("triton_url")
    @classmethod
    def _replica_urls(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, str) and "," in value:  # "a:8001,b:8001", as --triton-url takes
            value = [url.strip() for url in value.split(",")]
        if isinstance(value, list):
            if not value:
                raise ValueError("triton_url: an empty list names no replica")
            if len(set(value)) != len(value):
                raise ValueError(f"triton_url: duplicate replicas in {value}")
            if any(is_dns(url) for url in value):
                raise ValueError("triton_url: a dns: name stands alone, not in a list")
            return value[0] if len(value) == 1 else value
        if value is not None and is_dns(value):
            parse_dns(value)  # ValueError names what is wrong
        return value

    @property
    def triton_target(self) -> str | None:
        """The Triton spec as one string (a list joined by commas), the key replicas share."""
        url = self.triton_url
        return ",".join(url) if isinstance(url, list) else url

    @field_validator("lora", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict | LoraAdapter) else value

    @field_validator("lora")
    @classmethod
    def _unique_task_ids(cls, adapters: list[LoraAdapter]) -> list[LoraAdapter]:
        ids = [adapter.task_id for adapter in adapters]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate LoRA task ids: {ids}")
        return adapters

    whisper: WhisperOptions | None = Field(None, description="family 'whisper' only")

    @property
    def family_options(self) -> BaseModel | None:
        """The family's own options table, for families that take one."""
        return self.whisper

    @model_validator(mode="after")
    def _whisper_options(self) -> ServedModel:
        if self.whisper is not None and self.family != "whisper":
            raise ValueError(f"model {self.id!r}: 'whisper' options need family 'whisper'")
        return self

    @model_validator(mode="after")
    def _family_or_template(self) -> ServedModel:
        """No family: the model must be NVIDIA's llmapi model, whose prompts the gateway
        renders with the model's own chat template, so it needs the model's folder (an
        embedded reference model publishes its own)."""
        if self.family is not None:
            return self
        if self.tokenizer is None and self.triton_url is not None:
            raise ValueError(
                f"model {self.id!r} names no family: on NVIDIA's llmapi Triton model set "
                "tokenizer to the Hugging Face model folder (chat template and tokenizer), or "
                "set family for the engine path"
            )
        if self.tokenizer is not None and not self.tokenizer.is_dir():
            raise ValueError(
                f"model {self.id!r}: tokenizer {str(self.tokenizer)!r} is not a folder (NVIDIA's "
                "llmapi Triton model needs the Hugging Face model folder: its chat template and "
                "tokenizer.json)"
            )
        if self.tokenizer is not None:
            ChatTemplate.load(self.tokenizer)  # TemplateError (a ValueError) says what is missing
        return self

    @model_validator(mode="after")
    def _lora_needs_support(self) -> ServedModel:
        family = SUPPORTED_FAMILIES[self.family] if self.family is not None else None
        if self.lora and (family is None or not family.supports_lora):
            raise ValueError(f"model {self.id!r}: family {self.family!r} takes no LoRA adapters")
        return self


# What server_repo/reference's two Whisper models were "built" with (their config.pbtxt).
REFERENCE_WHISPER = WhisperOptions(
    vocabulary="bytes", max_prompt_tokens=64, max_sequence_tokens=192
)


def default_models() -> list[ServedModel]:
    """The embedded reference models served when the config names none."""
    return [
        # The tiny reference tokenizers have their own ids: let the server pick its EOS.
        ServedModel(
            id="reference-llava", family="llava", triton_model="reference_llava", end_id="server"
        ),
        ServedModel(
            id="reference-llava-onevision",
            family="llava_onevision",
            triton_model="reference_llava_onevision",
            end_id="server",
        ),
        # NVIDIA's llmapi model (the PyTorch backend's Triton path) over a tiny Qwen2.5-VL: no
        # family, its chat template and tokenizer published by the model itself (the embedded
        # Triton's tokenizers folder); KV blocks of 32 tokens, the PyTorch backend's default.
        ServedModel(id="reference-qwen2.5-vl", triton_model="reference_qwen2_5_vl"),
        # The tiny reference Whisper has a byte vocabulary and roomier decoder limits.
        ServedModel(
            id="reference-whisper",
            family="whisper",
            triton_model="reference_whisper",
            whisper=REFERENCE_WHISPER,
        ),
    ]
