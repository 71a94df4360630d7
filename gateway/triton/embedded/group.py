"""Several co-launched ``tritonserver``s over the same repository: replicas on loopback.

Each is an ``EmbeddedTriton`` of its own (its own free ports, its own watchdog restarting it,
its own clean-up), so a killed replica comes back on the same port while the others serve.
They start at once; if one cannot start, the ones that did are stopped again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from gateway.triton.embedded.launcher import EmbeddedTriton


@dataclass
class EmbeddedReplicas:
    servers: list[EmbeddedTriton]

    @classmethod
    def of(cls, replicas: int, make: Callable[[], EmbeddedTriton]) -> EmbeddedReplicas:
        return cls([make() for _ in range(replicas)])

    @property
    def grpc_urls(self) -> list[str]:
        return [server.grpc_url for server in self.servers]

    async def start(self) -> None:
        results = await asyncio.gather(
            *(server.start() for server in self.servers), return_exceptions=True
        )
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if failure is not None:
            await self.stop()
            raise failure

    async def stop(self) -> None:
        await asyncio.gather(*(server.stop() for server in self.servers))
