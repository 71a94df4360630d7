"""The ``GuideChecker`` a runtime builds once: its ``[guides]`` limits, sandbox and verdict
cache behind one ``error(guide)`` (what ``pipeline/structured/guides.check_guide`` asks)."""

from __future__ import annotations

from gateway.config import GuideSettings
from gateway.families.calls import Guide
from gateway.guides import GuideChecker


async def test_the_checker_holds_its_limits_and_remembers_its_verdicts() -> None:
    checker = GuideChecker.of(GuideSettings(max_regex_bytes=64, cache_bytes=1 << 20))
    try:
        assert await checker.error(Guide("json", "")) is None  # the engine's own grammar
        long = Guide("regex", "a" * 100)
        verdict = await checker.error(long)  # over [guides] max_regex_bytes: no compile
        assert verdict is not None and "max_regex_bytes" in verdict
        assert len(checker.verdicts) == 1  # remembered: the same guide is not measured again
        assert await checker.error(long) == verdict
        assert not checker.sandbox.pids  # refused by its bounds, never sent to a worker
    finally:
        await checker.aclose()
