"""Where a served model's replicas are: a fixed list, or the addresses behind one DNS name.

``triton_url`` in gRPC's own naming syntax, ``dns:[//authority/]host:port``:

- ``dns:///triton.ns.svc.cluster.local:8001`` resolves with the system resolver (what a
  Kubernetes pod's ``/etc/resolv.conf`` points at). A headless Service answers with one A
  record per ready pod, so the replica set follows the StatefulSet as it scales or restarts;
- ``dns://10.0.0.10:53/triton.ns.svc:8001`` asks that name server instead (dnspython), as
  gRPC's resolver does with an authority.

The name is resolved again every ``[upstream] dns_refresh_s``; each address becomes one
replica named ``ip:port``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

import dns.asyncresolver
import dns.exception
import dns.rdatatype
import dns.resolver

from gateway.errors import UpstreamUnavailable

DNS_SCHEME = "dns:"
DEFAULT_DNS_PORT = 53


@dataclass(frozen=True)
class DnsName:
    """One ``dns:`` target: the name, the port its replicas listen on, and the name server
    to ask (None: the system resolver)."""

    host: str
    port: int
    server: tuple[str, int] | None = None

    async def resolve(self, timeout_s: float = 2.0) -> list[str]:
        """The name's addresses as sorted ``ip:port`` replica names (IPv6 bracketed)."""
        try:
            if self.server is None:
                ips = await asyncio.wait_for(_system_addresses(self.host, self.port), timeout_s)
            else:
                ips = await _ask(self.server, self.host, timeout_s)
        except (OSError, asyncio.TimeoutError, dns.exception.DNSException) as exc:
            raise UpstreamUnavailable(f"cannot resolve {self.host!r}: {exc!r}") from exc
        return sorted({_join(ip, self.port) for ip in ips})


def is_dns(url: str) -> bool:
    return url.startswith(DNS_SCHEME)


def parse_dns(url: str) -> DnsName:
    """``dns:///host:port`` or ``dns://server[:port]/host:port``; ValueError otherwise."""
    if not is_dns(url):
        raise ValueError(f"not a dns: target: {url!r}")
    rest = url[len(DNS_SCHEME) :]
    server = None
    if rest.startswith("//"):
        authority, slash, rest = rest[2:].partition("/")
        if not slash:
            raise ValueError(f"{url!r}: expected dns:///host:port or dns://server/host:port")
        if authority:
            server = _split(authority, DEFAULT_DNS_PORT, url)
            ipaddress.ip_address(server[0])  # a name server is given by address
    host, port = _split(rest, None, url)
    return DnsName(host, port, server)


def _split(hostport: str, default_port: int | None, url: str) -> tuple[str, int]:
    if hostport.startswith("["):  # [v6]:port
        host, _, tail = hostport[1:].partition("]")
        port_text = tail.removeprefix(":")
    else:
        host, _, port_text = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    if not host:
        raise ValueError(f"{url!r}: no host")
    if not port_text:
        if default_port is None:
            raise ValueError(f"{url!r}: the replicas' port is required (host:port)")
        return host, default_port
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"{url!r}: port out of range")
    return host, port


def _join(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


async def _system_addresses(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return [str(info[4][0]) for info in infos]


async def _ask(server: tuple[str, int], host: str, timeout_s: float) -> list[str]:
    """A and AAAA records of ``host`` from ``server`` (no search list: the name is absolute)."""
    resolver = dns.asyncresolver.Resolver(configure=False)
    resolver.nameservers = [server[0]]
    resolver.port = server[1]
    resolver.lifetime = timeout_s
    ips: list[str] = []
    for kind in (dns.rdatatype.A, dns.rdatatype.AAAA):
        try:
            answer = await resolver.resolve(host, kind, search=False)
        except (dns.resolver.NoAnswer, dns.resolver.NXDOMAIN):
            continue
        ips += [record.to_text() for record in answer]
    return ips
