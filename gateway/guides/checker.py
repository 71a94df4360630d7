"""The guide checker a running gateway holds, built once: the ``[guides]`` limits, the
sandboxed compile workers and the verdict cache, behind one ``error(guide)``.

The pipeline (``pipeline/structured/guides.py``) asks this service whether a guide compiles;
it never sees the settings, the pool or the cache on their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import GuideSettings
from gateway.families.calls import Guide
from gateway.guides.compile import guide_error
from gateway.sandbox import SandboxPool, VerdictCache

__all__ = ["GUIDE_WORKER_MODULES", "GuideChecker"]

# What a guide compile worker imports before its first guide (the compiler and its job).
GUIDE_WORKER_MODULES = ("llguidance", "llguidance.gbnf_to_lark", "gateway.guides.engine")


@dataclass(frozen=True)
class GuideChecker:
    """Whether a guide compiles as the engine will compile it (``compile.py``)."""

    limits: GuideSettings
    sandbox: SandboxPool  # started on the first guide that reaches the compiler
    verdicts: VerdictCache

    @classmethod
    def of(cls, limits: GuideSettings) -> GuideChecker:
        """The checker ``[guides]`` configures (no worker started yet)."""
        sandbox = SandboxPool(limits.sandbox_limits(), preload=GUIDE_WORKER_MODULES)
        return cls(limits, sandbox, VerdictCache(limits.cache_bytes, limits.max_message_chars))

    async def error(self, guide: Guide) -> str | None:
        """Why ``guide`` cannot be used (a short sentence), or None when it compiles."""
        return await guide_error(guide, self.limits, self.sandbox, self.verdicts)

    async def aclose(self) -> None:
        await self.sandbox.aclose()
