"""The guide compiler moved to ``gateway/guides/`` (a service the runtime builds once); this
name stays for ``bench/structured.py``, which imports it from here."""

from gateway.guides.compile import compile_error, guide_error, short

__all__ = ["compile_error", "guide_error", "short"]
