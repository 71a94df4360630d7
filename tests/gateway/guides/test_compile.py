"""A guide is compiled as the engine compiles it, in the sandbox: what the engine would refuse
at its first token is refused here; a crash or a runaway is a verdict, not a dead gateway;
verdicts and messages are bounded."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from gateway.config import GuideSettings
from gateway.families.calls import Guide
from gateway.guides import GUIDE_WORKER_MODULES
from gateway.guides.compile import compile_error, guide_error, short
from gateway.sandbox import SandboxPool, VerdictCache
from tests.gateway.guides.test_bounds import chain, wide

# Limits that let every guide through to the compiler (to reach its failures).
OPEN = GuideSettings(max_ref_depth=10**6, max_rules=10**6, max_bytes=16 << 20,
                     max_regex_bytes=16 << 20, max_depth=10**6, max_properties=10**6,
                     max_branches=10**6, max_nodes=10**7, compile_timeout_s=4.0)  # fmt: skip


@pytest.fixture
async def pool() -> AsyncIterator[SandboxPool]:
    sandbox = SandboxPool(OPEN.sandbox_limits(), preload=GUIDE_WORKER_MODULES)
    yield sandbox
    await sandbox.aclose()


def test_the_engines_row_limit_is_applied() -> None:
    """600 optional properties (strict mode: no others) make a row of 2,399 Earley items after
    ``{``: the engine's "max is 2000" (issue 22 item 3), here before any Triton work."""
    assert "max is 2000" in (compile_error("json_schema", wide(600)) or "")
    assert compile_error("json_schema", wide(499)) is None
    many = {"anyOf": [json.loads(wide(300)) for _ in range(5)]}  # wide only together
    assert "max is 2000" in (compile_error("json_schema", json.dumps(many)) or "")


def test_the_engines_lexer_fuel_is_applied() -> None:
    assert "too many expressions" in (compile_error("regex", "(a{1000}){1000}") or "")


async def test_a_guide_that_crashes_the_compiler_is_a_verdict(pool: SandboxPool) -> None:
    verdict = await guide_error(Guide("json_schema", chain(2000)), OPEN, pool, VerdictCache())
    assert verdict is not None and "crashed the grammar compiler (SIGSEGV)" in verdict
    assert pool.crashed == 1
    assert await guide_error(Guide("regex", "a+"), OPEN, pool, VerdictCache()) is None


async def test_a_compile_over_its_budget_is_a_verdict(pool: SandboxPool) -> None:
    grammar = "\n".join(
        ["root ::= r0", *(f'r{i} ::= "a" r{i + 1}' for i in range(6000)), 'r6000 ::= "b"']
    )  # fmt: skip  (the converter alone takes seconds)
    verdict = await guide_error(Guide("ebnf_grammar", grammar), OPEN, pool, VerdictCache())
    assert verdict is not None and "compile_timeout_s" in verdict and pool.timed_out == 1


async def test_verdicts_are_remembered_and_short(pool: SandboxPool) -> None:
    cache = VerdictCache()
    huge = Guide("regex", "(" * 1_000_000)  # the compiler quotes all of it
    first = await guide_error(huge, OPEN, pool, cache)
    assert first is not None and len(first) <= OPEN.max_message_chars
    started = pool.started
    assert await guide_error(huge, OPEN, pool, cache) == first and cache.hits == 1
    assert pool.started == started and cache.bytes < 4096


async def test_any_json_and_limit_breaches_never_reach_the_sandbox() -> None:
    pool = SandboxPool(GuideSettings().sandbox_limits())
    assert await guide_error(Guide("json"), GuideSettings(), pool, VerdictCache()) is None
    breach = await guide_error(Guide("json_schema", chain(2000)), GuideSettings(), pool,
                               VerdictCache())  # fmt: skip
    assert breach is not None and "max_ref_depth" in breach
    assert pool.started == 0
    await pool.aclose()


def test_messages_keep_their_first_part_and_say_how_long_they_were() -> None:
    assert short("bad thing\n<state>\nparser dump", 100) == "bad thing"
    cut = short("x" * 5000, 100)
    assert len(cut) <= 100 and "(5000 chars)" in cut
