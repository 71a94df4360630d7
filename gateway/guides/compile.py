"""Compile a guide as the engine will, in a sandbox, before Triton sees it; remember verdicts.

TensorRT-LLM compiles guides inside the engine; a guide it cannot compile fails the request
there, after admission, and an unknown guide type is not even an error (it is dropped, and the
output is unconstrained). So the gateway compiles every guide first with llguidance (a
zero-dependency abi3 wheel; xgrammar would pull torch, transformers and triton into the gateway)
and answers 400 with the engine's own message.

Three steps, cheapest first:

1. the verdict cache (``gateway/sandbox/cache.py``), by a digest of (type, guide): a guide sent
   on every request is compiled once; the cache is bounded in bytes, its messages cut short;
2. the structural limits (``bounds.py``), one pass on the event loop (a large guide's in
   steps, the loop taking its turn between them): a guide over one is refused naming the
   limit, and never reaches the compiler;
3. ``engine.compile_error`` in a sandboxed worker process (``gateway/sandbox/``): native code
   that overflows its stack or runs away ends that worker, never the gateway, and the request
   gets a 400 (the guide is the cause). The compile is the engine's, limits included
   (``engine.py``: strict mode, and the parser limits probed from the matcher's start).

JSON schemas and regexes are llguidance's native inputs; an ``ebnf_grammar`` (xgrammar's GBNF
dialect) goes through llguidance's ``gbnf_to_lark`` converter, which covers the GBNF that
llama.cpp and xgrammar share.
"""

from __future__ import annotations

import hashlib

from gateway.config import GuideSettings
from gateway.families.calls import Guide
from gateway.guides.bounds import over_limit, over_limit_soon
from gateway.guides.engine import compile_error
from gateway.sandbox import (
    SandboxCrashed,
    SandboxPool,
    SandboxTimeout,
    VerdictCache,
)
from gateway.sandbox.pool import SandboxJobFailed

INLINE_BYTES = 16 * 1024  # guides measured on the event loop (well under a millisecond)


async def guide_error(
    guide: Guide, limits: GuideSettings, pool: SandboxPool, cache: VerdictCache
) -> str | None:
    """Why ``guide`` cannot be used (a short sentence), or None when it compiles."""
    if guide.type == "json":
        return None  # any JSON: TensorRT-LLM's built-in grammar, nothing to compile
    key = hashlib.blake2b(f"{guide.type}\0{guide.text}".encode(), digest_size=16).digest()
    found, verdict = cache.get(key)
    if found:
        return verdict
    if len(guide.text) <= INLINE_BYTES:
        verdict = over_limit(guide.type, guide.text, limits)
    else:  # a walk of up to max_bytes takes tens of ms: in steps, the loop between them
        verdict = await over_limit_soon(guide.type, guide.text, limits)
    if verdict is None:
        verdict = await _compiled(guide, limits, pool)
    if verdict is not None:
        verdict = short(verdict, limits.max_message_chars)
    cache.put(key, verdict)
    return verdict


async def _compiled(guide: Guide, limits: GuideSettings, pool: SandboxPool) -> str | None:
    try:
        verdict: str | None = await pool.run(compile_error, guide.type, guide.text)
    except SandboxTimeout:
        return (f"compiling it took longer than {limits.compile_timeout_s:g} s, over the limit "
                "[guides] compile_timeout_s")  # fmt: skip
    except SandboxCrashed as crash:
        return f"it crashed the grammar compiler ({crash.how}); simplify it (fewer levels)"
    except SandboxJobFailed as failed:
        return str(failed)
    return verdict


def short(message: str, most: int) -> str:
    """The message's first line, at most ``most`` characters (a compiler quotes the guide)."""
    first = " ".join(message.split("\n<state>")[0].split())
    return first if len(first) <= most else first[: most - 25] + f" ... ({len(first)} chars)"


__all__ = ["compile_error", "guide_error", "short"]
