"""Run a pure function of plain data where a crash or a runaway cannot hurt the gateway: a
pool of sandboxed worker processes (``pool.py``) and a verdict cache bounded in bytes
(``cache.py``). The guide compiler uses both (``guides/compile.py``)."""

from gateway.sandbox.cache import VerdictCache
from gateway.sandbox.pool import SandboxCrashed, SandboxLimits, SandboxPool, SandboxTimeout

__all__ = ["SandboxCrashed", "SandboxLimits", "SandboxPool", "SandboxTimeout", "VerdictCache"]
