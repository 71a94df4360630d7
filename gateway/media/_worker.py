"""One media worker process: the sandbox's child process (``gateway/sandbox/_child.py``: a
fresh interpreter, never a ``fork`` of the threaded gateway, its address space capped, dying
with its parent, jobs and replies by pickle over a pipe each way) with the media's own runner,
``call_job``. ``offload.py`` pools them.

A job's error is mapped here, in the worker: the gateway's own errors pass as they are, an
out-of-memory becomes ``MediaTooLarge``, anything else ``MediaDecodeError`` (logged, not echoed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from gateway.errors import GatewayError, MediaDecodeError, MediaTooLarge
from gateway.media import stripes
from gateway.sandbox._child import Child, Reply, spawn_child

log = logging.getLogger(__name__)

Worker = Child
__all__ = ["Reply", "Worker", "call_in_worker", "call_job", "spawn_worker"]


def call_job(function: Callable[..., Any], args: tuple[Any, ...]) -> Reply:
    """``function(*args)`` with its errors mapped as a worker maps them (the thread lane too)."""
    try:
        return True, function(*args)
    except GatewayError as exc:
        return False, exc
    except MemoryError:
        return False, MediaTooLarge(
            "The media needs more memory to decode than this server allows."
        )
    except Exception as exc:  # a decoder error nobody mapped: log it here, say little outside
        name = getattr(function, "__name__", "?")
        log.warning("media worker: %s in %s", type(exc).__name__, name)
        return False, MediaDecodeError("The media could not be decoded.")


def call_in_worker(function: Callable[..., Any], args: tuple[Any, ...]) -> Reply:
    """A worker process's runner: ``call_job``, with the job's image work in its one thread.

    A worker holds the items a thread may not take (shapes the header cannot bound) under an
    address-space cap, several of them per gateway; the stripes' pool (threads, with their
    stacks and malloc arenas inside that cap) is the gateway process's own, which is what
    ``[decode] stripe_threads`` sizes. Set before every job: cheap, and no job can leave a
    pool behind for the next."""
    stripes.configure(0)
    return call_job(function, args)


def spawn_worker(preload: Sequence[str], memory_limit_mb: int | None) -> Worker:
    """Start one worker interpreter (blocking: call it in a thread): decoding runs at the
    gateway's own priority (it is on the request's path) with the inherited stack."""
    return spawn_child(
        preload, memory_limit_mb, None, nice=0, runner="gateway.media._worker:call_in_worker"
    )
