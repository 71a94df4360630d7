"""Request and completion ids: unique per process and across workers, cheap, not secret.

``uuid.uuid4().hex`` reads 16 bytes from the kernel (a system call) and builds a ``UUID``
object: about 3 us on each request's way to its Triton call, twice (the request id, the
completion id), which a paced load pays on a cold core. These ids only have to be unique, so
they come from a generator of their own, seeded by the OS and re-seeded in every forked
worker (the ids never repeat across processes). Its own, not ``random``'s: ids are echoed to
clients, and nothing else (the fresh sampling seeds) should be predictable from them.

Ids that work as capabilities (stored response ids: ``resp_...``) keep ``uuid4``.
"""

from __future__ import annotations

import os
import random

__all__ = ["hex_id"]

_ids = random.Random()
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_ids.seed)


def hex_id() -> str:
    """32 lowercase hex digits (128 random bits), as ``uuid.uuid4().hex`` is written."""
    return f"{_ids.getrandbits(128):032x}"
