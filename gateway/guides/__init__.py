"""Guides checked before Triton sees them: structural bounds (``bounds.py``), the engine's
compile in a sandboxed worker (``engine.py``, sent there by ``compile.py``), verdicts cached,
all behind the ``GuideChecker`` a runtime builds once (``checker.py``)."""

from gateway.guides.checker import GUIDE_WORKER_MODULES, GuideChecker

__all__ = ["GUIDE_WORKER_MODULES", "GuideChecker"]
