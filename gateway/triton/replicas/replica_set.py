"""Several Triton replicas of the same models behind one ``TritonBackend``.

The pipeline calls a ``ReplicaSet`` exactly as it calls one ``TritonClient``; the set picks the
replica for each call (``choice.py``), keeps each replica's health (``health.py``), and follows
a DNS name's addresses (``discovery.py``). What it guarantees:

- a replica is routed to only once its config for the model agrees with the others'
  (``agreement.py``); one that disagrees is refused, with a log line naming the difference;
- a call that fails to reach its replica before the first response (connection refused,
  ``UNAVAILABLE``, a deadline, a model not ready) is sent once more, to the next choice, and
  that replica is taken out for a backoff; nothing already streamed is ever retried;
- the readiness probe (``is_ready``, run by the runtime's ``ReadinessWatch``) probes every
  replica, so a dead one leaves and a restarted one rejoins within one probe interval;
- a call waiting on a replica whose probe fails (a hung server: it answers neither) is ended
  at once, and sent once more to the next choice when nothing had come back yet.

Each replica's calls, open calls, health, ejections and retries go to ``ReplicaMetrics`` as
they happen (a few operations per call, none per token), so ``mmgw serve --workers`` adds
every worker's up; ``in_flight`` is also kept as a plain int, which routing reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import service_pb2

from gateway.errors import UpstreamLost, UpstreamUnavailable
from gateway.observability.metrics import ReplicaMetrics
from gateway.triton.backend import Route, TritonBackend
from gateway.triton.contract import ModelContract
from gateway.triton.replicas import choice
from gateway.triton.replicas.agreement import difference, majority
from gateway.triton.replicas.discovery import DnsName
from gateway.triton.replicas.health import DEFAULT_EJECT_BACKOFF_S, Health
from gateway.triton.replicas.lost import LostWatch

log = logging.getLogger(__name__)

ATTEMPTS = 2  # the first choice, then one retry on the next


@dataclass(frozen=True)
class Routing:
    """A served model's routing: the policy and, for affinity, when a hot key spills."""

    policy: choice.Policy = "affinity"
    spill_ratio: float = 1.5
    spill_floor: int = 8


@dataclass
class Replica:
    """One Triton server of the set."""

    name: str  # host:port, as routed to and labelled in metrics
    backend: TritonBackend
    health: Health
    in_flight: int = 0  # what routing reads (the metrics have it too)
    requests: int = 0
    retried: int = 0  # calls that failed here before their first byte and went to another
    # Triton model -> None when its config agrees with the set's, else why it is refused.
    verdicts: dict[str, str | None] = field(default_factory=dict)
    # The calls waiting on it now: each ends itself when told the replica was lost.
    waiting: set[Callable[[], None]] = field(default_factory=set)

    def serves(self, model: str) -> bool:
        return model in self.verdicts and self.verdicts[model] is None

    def agrees(self) -> bool:
        """No model of this replica is refused for a disagreeing config."""
        return all(verdict is None for verdict in self.verdicts.values())


class ReplicaSet:
    """``TritonBackend`` over several replicas; ``url`` names the set (its spec)."""

    def __init__(
        self,
        url: str,
        members: Sequence[str] | DnsName,
        connect: Callable[[str], TritonBackend],
        routing: Routing | None = None,
        eject_backoff_s: float = DEFAULT_EJECT_BACKOFF_S,
        dns_refresh_s: float = 10.0,
        probe_timeout_s: float = 2.0,
        metrics: ReplicaMetrics | None = None,
    ) -> None:
        self.url = url
        self.metrics = metrics
        self.routing = routing or Routing()
        self.replicas: dict[str, Replica] = {}
        self._connect = connect
        self._backoff_s = eject_backoff_s
        self._dns = members if isinstance(members, DnsName) else None
        self._dns_refresh_s = dns_refresh_s
        # Below the readiness watch's own bound, so a hung replica is judged on its own and
        # cannot make the whole set look unready.
        self._probe_timeout_s = probe_timeout_s
        self._references: dict[str, ModelContract] = {}  # Triton model -> the agreed config
        self._retiring: list[Replica] = []  # gone from DNS; closed once idle
        self._turn = 0
        self._refresher: asyncio.Task[None] | None = None
        if not isinstance(members, DnsName):
            self._admit(members)

    # -- membership ---------------------------------------------------------------------------

    def _admit(self, names: Sequence[str]) -> None:
        for name in names:
            if name not in self.replicas:
                self.replicas[name] = Replica(name, self._connect(name), Health(self._backoff_s))
                self._publish(self.replicas[name])

    async def refresh(self) -> None:
        """Resolve the DNS name again: new addresses join (once their config agrees), vanished
        ones leave. A failed or empty answer keeps the current replicas."""
        if self._dns is None:
            return
        try:
            names = await self._dns.resolve()
        except UpstreamUnavailable as exc:
            log.warning(
                "replicas of %s: %s; keeping %s", self.url, exc.message, sorted(self.replicas)
            )
            return
        if not names:
            log.warning("replicas of %s: no addresses; keeping %s", self.url, sorted(self.replicas))
            return
        joined = [n for n in names if n not in self.replicas]
        left = [n for n in self.replicas if n not in names]
        self._admit(joined)
        for name in left:
            self._retiring.append(self.replicas.pop(name))
        if joined or left:
            log.info("replicas of %s: joined %s, left %s", self.url, joined, left)
        await self._close_idle_retired()

    async def _close_idle_retired(self) -> None:
        idle = [r for r in self._retiring if r.in_flight == 0]
        self._retiring = [r for r in self._retiring if r.in_flight > 0]
        for replica in idle:
            await replica.backend.close()

    def start(self) -> None:
        """Re-resolve a DNS name every ``dns_refresh_s`` (the app's lifespan calls it)."""

        async def forever() -> None:
            while True:
                await asyncio.sleep(self._dns_refresh_s)
                await self.refresh()

        if self._dns is not None and self._refresher is None:
            self._refresher = asyncio.ensure_future(forever())

    async def close(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
            self._refresher = None
        for replica in [*self.replicas.values(), *self._retiring]:
            await replica.backend.close()

    # -- contracts ----------------------------------------------------------------------------

    async def contract(self, model_name: str) -> ModelContract:
        """The model's config as the replicas agree on it; each replica is judged against it.

        The first read takes the config most replicas declare; later replicas are held to it."""
        replicas = list(self.replicas.values())
        results = await asyncio.gather(
            *(r.backend.contract(model_name) for r in replicas), return_exceptions=True
        )
        read = {
            r.name: c
            for r, c in zip(replicas, results, strict=True)
            if isinstance(c, ModelContract)
        }
        if not read:
            failure = next((e for e in results if isinstance(e, UpstreamUnavailable)), None)
            raise failure or UpstreamUnavailable(
                f"no replica of {self.url} answers for Triton model {model_name!r}"
            )
        reference = self._references.setdefault(model_name, majority(read))
        for replica in replicas:
            if replica.name in read:
                self._judge(replica, model_name, read[replica.name], reference)
        return reference

    def _judge(
        self, replica: Replica, model: str, contract: ModelContract, reference: ModelContract
    ) -> None:
        why = difference(reference, contract)
        if why is not None and replica.verdicts.get(model, "") != why:
            log.error(
                "Triton replica %s refused for model %r: its config disagrees with the other "
                "replicas of %s (%s); no request goes to it",
                replica.name,
                model,
                self.url,
                why,
            )
        replica.verdicts[model] = why
        self._publish(replica)

    async def _verify(self, replica: Replica, models: Sequence[str]) -> None:
        """Judge a replica's config for the models the set has a reference for (once)."""
        for model in models:
            reference = self._references.get(model)
            if reference is None or model in replica.verdicts:
                continue
            try:
                contract = await replica.backend.contract(model)
            except UpstreamUnavailable:
                continue  # judged on a later probe or call
            self._judge(replica, model, contract, reference)

    # -- health -------------------------------------------------------------------------------

    async def is_ready(self, model_names: Sequence[str] = ()) -> bool:
        """Probe every replica; ready when at least one serves every model named."""
        replicas = list(self.replicas.values())
        ready = await asyncio.gather(*(self._probe(r, model_names) for r in replicas))
        return any(ready)

    async def _probe(self, replica: Replica, models: Sequence[str]) -> bool:
        try:
            ready = await asyncio.wait_for(replica.backend.is_ready(models), self._probe_timeout_s)
        except (asyncio.TimeoutError, OSError):
            ready = False
        if replica.health.probed(ready):
            state = "ready: back in rotation" if ready else "not ready: out of rotation"
            log.warning("Triton replica %s of %s is %s", replica.name, self.url, state)
            if ready:
                replica.verdicts.clear()  # a server that restarted may serve another config
        if not ready:
            for lose in list(replica.waiting):
                lose()
        self._publish(replica)
        if not ready:
            return False
        await self._verify(replica, models)
        return all(replica.verdicts.get(m) is None for m in models)

    # -- calls --------------------------------------------------------------------------------

    def order(self, model_name: str, key: int | None) -> list[Replica]:
        """The replicas to try for one call, best first: those serving the model and healthy;
        when none is, those whose probe passes (ejected ones get a try before a 503)."""
        now = time.monotonic()
        serving = [r for r in self.replicas.values() if r.serves(model_name)]
        candidates = [r for r in serving if r.health.available(now)]
        if not candidates:
            candidates = [r for r in serving if r.health.probe_ok]
        by_name = {r.name: r for r in candidates}
        names = sorted(by_name)
        in_flight = {r.name: r.in_flight for r in candidates}
        routing = self.routing
        self._turn += 1
        ranked = choice.order(
            routing.policy,
            names,
            in_flight,
            key,
            self._turn,
            routing.spill_ratio,
            routing.spill_floor,
        )
        return [by_name[name] for name in ranked]

    async def stream(
        self,
        model_name: str,
        inputs: Sequence[grpcclient.InferInput],
        request_id: str,
        outputs: Sequence[str] = (),
        route: Route | None = None,
    ) -> AsyncGenerator[service_pb2.ModelInferResponse, None]:
        """One call on the best replica; retried once on the next choice when the first fails
        before its first response."""
        if model_name not in self._references:
            await self.contract(model_name)
        key = route.key if route else None
        tries = self.order(model_name, key)[:ATTEMPTS]
        if not tries:  # replicas that joined since the last probe may not be judged yet
            await asyncio.gather(*(self._verify(r, [model_name]) for r in self.replicas.values()))
            tries = self.order(model_name, key)[:ATTEMPTS]
        if not tries:
            raise UpstreamUnavailable(
                f"no replica of {self.url} is ready for Triton model {model_name!r}; retry shortly"
            )
        for attempt, replica in enumerate(tries, start=1):
            if route is not None:
                route.replica = replica.name
            started = False
            replica.in_flight += 1
            replica.requests += 1
            self._calls(replica, 1)
            lost = LostWatch(replica)
            try:
                responses: Any = replica.backend.stream(model_name, inputs, request_id, outputs)
                async with contextlib.aclosing(responses):
                    async for response in responses:
                        started = True
                        yield response
                if replica.health.succeeded():
                    self._publish(replica)
                return
            except asyncio.CancelledError:
                if not lost.fired:
                    raise
                lost.take_back()
                self._failed(replica, lost.error(), started, attempt, tries)
            except UpstreamUnavailable as exc:
                self._failed(replica, exc, started, attempt, tries)
            finally:
                lost.close()
                replica.in_flight -= 1
                self._calls(replica, -1)

    def _failed(
        self,
        replica: Replica,
        exc: UpstreamUnavailable,
        started: bool,
        attempt: int,
        tries: Sequence[Replica],
    ) -> None:
        """A call could not reach ``replica`` (or it was lost under the call): the replica is
        out for a backoff; returns when the call is to be sent to the next choice, else
        raises (``UpstreamLost`` once something was streamed: it is not generated again)."""
        pause = replica.health.failed()
        self._ejected(replica)
        retry = not started and attempt < len(tries)
        log.warning(
            "Triton replica %s failed %s (%s): out for %.1f s%s",
            replica.name,
            "mid-stream" if started else "before its first response",
            exc.message,
            pause,
            f"; retrying on {tries[attempt].name}" if retry else "",
        )
        if not retry:
            if started:  # what it generated is lost with it
                raise UpstreamLost(exc.message) from exc
            raise exc
        replica.retried += 1
        if self.metrics is not None:
            self.metrics.retries.labels(replica.name).inc()

    # -- observability ------------------------------------------------------------------------

    def _calls(self, replica: Replica, change: int) -> None:
        if self.metrics is not None:
            self.metrics.in_flight.labels(replica.name).inc(change)
            if change > 0:
                self.metrics.requests.labels(replica.name).inc()

    def _ejected(self, replica: Replica) -> None:
        if self.metrics is not None:
            self.metrics.ejections.labels(replica.name).inc()
        self._publish(replica)

    def _publish(self, replica: Replica) -> None:
        """The replica's health as routing sees it now (after a probe, a verdict, an
        ejection, a first success after failures)."""
        if self.metrics is not None:
            healthy = replica.health.available() and replica.agrees()
            self.metrics.healthy.labels(replica.name).set(1 if healthy else 0)
