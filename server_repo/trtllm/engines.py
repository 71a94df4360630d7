"""Read what a built engine directory says about itself (its ``config.json``).

The repository's values must agree with how the engines were built, and the engines record
that in ``config.json``: trtllm-build writes ``pretrained_config`` (dtype, mapping) and
``build_config`` (sizes, ``plugin_config``); build_visual_engine.py writes ``builder_config``.
Field names moved between TensorRT-LLM releases, so each lookup tries the known spellings.
This module only reads; deciding what disagrees is ``checks.py``'s job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server_repo.trtllm.errors import EngineError


def _dig(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _first(data: dict[str, Any], *dotted: str) -> tuple[str | None, Any]:
    """The first of ``dotted`` present in ``data``, with the spelling that matched."""
    for path in dotted:
        value = _dig(data, path)
        if value is not None:
            return path, value
    return None, None


def load_config(engine_dir: Path) -> dict[str, Any]:
    """``engine_dir/config.json``, or an error that says what was expected there."""
    path = engine_dir / "config.json"
    if not path.is_file():
        raise EngineError(f"{engine_dir}: no config.json; is this a built engine directory?")
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EngineError(f"{path}: unreadable ({exc})") from exc
    if not isinstance(data, dict):
        raise EngineError(f"{path}: expected a JSON object")
    return data


@dataclass(frozen=True)
class LlmEngine:
    """A TensorRT-LLM engine built by trtllm-build (an LLM, a decoder or a Whisper encoder)."""

    path: Path
    raw: dict[str, Any]

    @classmethod
    def load(cls, engine_dir: Path) -> LlmEngine:
        raw = load_config(engine_dir)
        if not isinstance(raw.get("build_config"), dict):
            raise EngineError(
                f"{engine_dir / 'config.json'}: no build_config; build_visual_engine.py output "
                "or a checkpoint (not an engine) given where a trtllm-build engine belongs?"
            )
        return cls(engine_dir, raw)

    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    @property
    def architecture(self) -> str:
        return str(_dig(self.raw, "pretrained_config.architecture") or "unknown")

    @property
    def dtype(self) -> str | None:
        _, value = _first(self.raw, "pretrained_config.dtype", "build_config.plugin_config.dtype")
        return str(value) if value is not None else None

    @property
    def max_batch_size(self) -> int:
        return int(_dig(self.raw, "build_config.max_batch_size") or 0)

    @property
    def max_input_len(self) -> int:
        return int(_dig(self.raw, "build_config.max_input_len") or 0)

    def budget(self, field: str) -> tuple[str, int]:
        """A visual-feature budget and where it was found. ``--max_multimodal_len`` is kept
        as ``max_prompt_embedding_table_size``; a ``max_multimodal_len`` key is read too."""
        aliases = [f"build_config.{field}"]
        if field == "max_prompt_embedding_table_size":
            aliases.append("build_config.max_multimodal_len")
        where, value = _first(self.raw, *aliases)
        return (where or aliases[0]), int(value or 0)

    def plugin(self, name: str) -> Any:
        _, value = _first(self.raw, f"build_config.plugin_config.{name}", f"plugin_config.{name}")
        return value

    @property
    def paged_kv_cache(self) -> bool:
        kv_type = _dig(self.raw, "build_config.kv_cache_type")
        if kv_type is not None:
            return str(kv_type).upper() == "PAGED"
        return bool(self.plugin("paged_kv_cache"))

    @property
    def paged_context_fmha(self) -> bool:
        return bool(self.plugin("use_paged_context_fmha"))

    @property
    def tokens_per_block(self) -> int | None:
        value = self.plugin("tokens_per_block")
        return int(value) if value else None

    @property
    def world_size(self) -> int:
        mapping = _dig(self.raw, "pretrained_config.mapping") or {}
        if "world_size" in mapping:
            return int(mapping["world_size"])
        return int(mapping.get("tp_size", 1)) * int(mapping.get("pp_size", 1))

    @property
    def n_mels(self) -> int | None:
        value = _dig(self.raw, "pretrained_config.n_mels")
        return int(value) if value else None


@dataclass(frozen=True)
class VisualEngine:
    """A vision encoder built by build_visual_engine.py (a TensorRT engine plus config.json)."""

    path: Path
    raw: dict[str, Any]

    @classmethod
    def load(cls, engine_dir: Path) -> VisualEngine:
        raw = load_config(engine_dir)
        if not isinstance(raw.get("builder_config"), dict):
            raise EngineError(
                f"{engine_dir / 'config.json'}: no builder_config; expected the output "
                "directory of build_visual_engine.py"
            )
        return cls(engine_dir, raw)

    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    @property
    def model_type(self) -> str | None:
        value = _dig(self.raw, "builder_config.model_type")
        return str(value) if value is not None else None

    @property
    def max_batch_size(self) -> int:
        return int(_dig(self.raw, "builder_config.max_batch_size") or 0)


@dataclass(frozen=True)
class Engines:
    """The engines one repository serves: LLM + vision encoder, or Whisper encoder + decoder."""

    llm: LlmEngine
    visual: VisualEngine | None = None
    encoder: LlmEngine | None = None
