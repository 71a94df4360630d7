"""Replicas found by DNS: ``dns:`` targets parsed, resolved against a name server this test
runs on loopback (dnspython builds its answers), and followed as its records change."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import dns.message
import dns.rcode
import dns.rrset
import pytest

from gateway.app import create_app
from gateway.config import EmbeddedSettings, ServedModel, Settings
from gateway.errors import UpstreamUnavailable
from gateway.media.decoder import InProcessDecoder
from gateway.runtime import build_runtime
from gateway.triton.replicas import DnsName, ReplicaSet, parse_dns
from tests.fakes.app import chat, http_client
from tests.fakes.triton import FakeTriton

NAME = "triton.models.svc.cluster.local."


class NameServer(asyncio.DatagramProtocol):
    """A loopback DNS server answering A queries from ``records`` (NXDOMAIN otherwise)."""

    def __init__(self) -> None:
        self.records: dict[str, list[str]] = {}
        self.queries = 0
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.queries += 1
        query = dns.message.from_wire(data)
        response = dns.message.make_response(query)
        question = query.question[0]
        ips = self.records.get(question.name.to_text())
        if ips is None:
            response.set_rcode(dns.rcode.NXDOMAIN)
        elif question.rdtype == dns.rdatatype.A and ips:
            response.answer.append(dns.rrset.from_text_list(question.name, 5, "IN", "A", ips))
        assert self.transport is not None
        self.transport.sendto(response.to_wire(), addr)


@pytest.fixture
async def name_server() -> AsyncIterator[tuple[NameServer, int]]:
    loop = asyncio.get_running_loop()
    transport, server = await loop.create_datagram_endpoint(NameServer, local_addr=("127.0.0.1", 0))
    try:
        yield server, transport.get_extra_info("sockname")[1]
    finally:
        transport.close()


def test_dns_targets_in_grpc_naming() -> None:
    assert parse_dns("dns:///triton.ns.svc:8001") == DnsName("triton.ns.svc", 8001)
    assert parse_dns("dns://10.96.0.10/triton:8001") == DnsName("triton", 8001, ("10.96.0.10", 53))
    assert parse_dns("dns://127.0.0.1:5353/t:1").server == ("127.0.0.1", 5353)
    for wrong in ("dns:///triton", "dns://not-an-ip/t:1", "dns://x", "dns:///t:99999"):
        with pytest.raises(ValueError):
            parse_dns(wrong)


def test_config_refuses_a_dns_name_inside_a_list() -> None:
    with pytest.raises(ValueError, match="stands alone"):
        ServedModel(id="m", family="llava", triton_model="m", triton_url=["dns:///a:1", "b:1"])


async def test_resolves_every_address_from_the_name_server_it_is_given(
    name_server: tuple[NameServer, int],
) -> None:
    server, port = name_server
    server.records[NAME] = ["127.0.0.3", "127.0.0.2"]
    target = parse_dns(f"dns://127.0.0.1:{port}/{NAME}:8001")
    assert await target.resolve() == ["127.0.0.2:8001", "127.0.0.3:8001"]
    assert await parse_dns(f"dns://127.0.0.1:{port}/missing.example.:8001").resolve() == []
    silent = parse_dns(f"dns://127.0.0.1:{free_udp_port()}/{NAME}:8001")  # nobody answers
    with pytest.raises(UpstreamUnavailable, match="cannot resolve"):
        await silent.resolve(timeout_s=0.3)


async def test_the_gateway_follows_the_records_as_replicas_come_and_go(
    name_server: tuple[NameServer, int],
) -> None:
    server, port = name_server
    fakes = {f"127.0.0.{i}:8001": FakeTriton(url=f"127.0.0.{i}:8001") for i in (1, 2, 3)}
    server.records[NAME] = ["127.0.0.1", "127.0.0.2"]
    settings = Settings(
        models=[
            ServedModel(
                id="fake-llava",
                family="llava",
                triton_model="ensemble",
                triton_url=f"dns://127.0.0.1:{port}/{NAME}:8001",
                routing="round_robin",
            )
        ],
        embedded=EmbeddedSettings(enabled=False),
        decode={"workers": 1},
        upstream={"dns_refresh_s": 0.05},
    )
    runtime = await build_runtime(  # media on threads: no decode worker process
        settings,
        connect=fakes.__getitem__,  # type: ignore[arg-type]
        decoder=InProcessDecoder(),
    )
    [replica_set] = runtime.replica_sets
    assert isinstance(replica_set, ReplicaSet)
    assert sorted(replica_set.replicas) == ["127.0.0.1:8001", "127.0.0.2:8001"]
    app = create_app(settings, runtime)
    app.state.runtime = runtime
    runtime.start_watching()  # the lifespan's job: probes, and the DNS refresh
    try:
        async with http_client(app) as http:
            server.records[NAME] = ["127.0.0.2", "127.0.0.3"]  # a pod replaced
            await wait_for(lambda: "127.0.0.3:8001" in replica_set.replicas)
            await wait_for(lambda: fakes["127.0.0.1:8001"].closed)  # idle, so closed at once
            # The newcomer is judged (its config agrees) and then takes its turn.
            await wait_for(lambda: replica_set.replicas["127.0.0.3:8001"].serves("ensemble"))
            before = len(fakes["127.0.0.1:8001"].requests)
            for _ in range(4):
                assert (await http.post("/v1/chat/completions", json=chat())).status_code == 200
            assert len(fakes["127.0.0.3:8001"].requests) == 2
            assert len(fakes["127.0.0.2:8001"].requests) == 2
            assert len(fakes["127.0.0.1:8001"].requests) == before
            server.records.pop(NAME)  # the name vanishes: keep what we have
            queries = server.queries
            await wait_for(lambda: server.queries > queries + 2)
            assert sorted(replica_set.replicas) == ["127.0.0.2:8001", "127.0.0.3:8001"]
    finally:
        await runtime.aclose()


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def wait_for(condition: Any, timeout: float = 5.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout)
