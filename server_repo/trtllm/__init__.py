"""Assemble a Triton model repository for NVIDIA's TensorRT-LLM backend from built engines.

``mmgw trtllm-repo`` replaces the copy-and-``fill_template.py`` dance of NVIDIA's guides
with one checked command: it reads the engines' ``config.json``, refuses values that
disagree (feature budgets, dtypes, KV reuse, cross-attention KV, world size), fills the
user's own tensorrtllm_backend templates, re-reads every config as Triton's ``ModelConfig``,
and writes the matching gateway TOML and launch command.

Modules, in the order a run uses them: ``families`` (per-family facts), ``request`` (what
was asked), ``engines`` (what was built), ``checks`` (do they agree), ``values`` (the
``${...}`` values), ``fill`` (templating), ``verify`` (read back), ``gateway_config`` and
``assemble`` (write it all, ``build_repository``); ``cli`` holds the options. ``llmapi``
(``--backend llmapi``) writes NVIDIA's PyTorch-backend repository instead: no engines, their
``tensorrt_llm`` Python model over a Hugging Face folder named in ``model.yaml``. Importing this
package stays cheap (no protobuf or gRPC) so ``mmgw serve`` does not pay for it.
"""

from __future__ import annotations

from server_repo.trtllm.errors import EngineError, InconsistentInput, RepoError, TemplateError
from server_repo.trtllm.families import SUPPORTED_FAMILIES, FamilySpec
from server_repo.trtllm.request import RepoRequest

__all__ = [
    "SUPPORTED_FAMILIES",
    "EngineError",
    "FamilySpec",
    "InconsistentInput",
    "RepoError",
    "RepoRequest",
    "TemplateError",
]
