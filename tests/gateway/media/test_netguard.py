"""SSRF table for netguard: every address class a user URL could aim at, judged once."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.media.netguard import embedded_ipv4, is_globally_routable, parse_ip

REFUSED = [
    # IPv4
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "this network"),
    ("10.1.2.3", "private 10/8"),
    ("100.64.0.1", "CGNAT"),
    ("100.127.255.254", "CGNAT upper end"),
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback /8"),
    ("169.254.169.254", "cloud metadata"),
    ("169.254.0.1", "link-local"),
    ("172.16.0.1", "private 172.16/12"),
    ("172.31.255.255", "private 172.16/12 upper"),
    ("192.0.0.1", "IETF protocol assignments"),
    ("192.0.2.10", "TEST-NET-1"),
    ("192.88.99.1", "6to4 relay anycast"),
    ("192.168.1.1", "private 192.168/16"),
    ("198.18.0.1", "benchmark"),
    ("198.19.255.255", "benchmark upper"),
    ("198.51.100.7", "TEST-NET-2"),
    ("203.0.113.9", "TEST-NET-3"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "SSDP multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    # IPv6
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("::127.0.0.1", "IPv4-compatible loopback"),
    ("::8.8.8.8", "IPv4-compatible (deprecated) even when public"),
    ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
    ("::ffff:169.254.169.254", "IPv4-mapped metadata"),
    ("::ffff:10.0.0.1", "IPv4-mapped private"),
    ("64:ff9b::7f00:1", "NAT64 of loopback"),
    ("64:ff9b::a9fe:a9fe", "NAT64 of metadata"),
    ("64:ff9b::192.168.0.1", "NAT64 of private"),
    ("64:ff9b:1::808:808", "NAT64 local-use"),
    ("2002:7f00:1::1", "6to4 of loopback"),
    ("2002:a9fe:a9fe::", "6to4 of metadata"),
    ("2002:c0a8:101::1", "6to4 of private"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
    ("2001:2::1", "benchmark"),
    ("2001:10::1", "ORCHID"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation RFC 9637"),
    ("100::1", "discard"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local with zone"),
    ("fec0::1", "site-local"),
    ("fc00::1", "unique local"),
    ("fd12:3456:789a::1", "unique local fd"),
    ("ff02::1", "multicast"),
    ("ff0e::1", "global-scope multicast"),
    ("5f00::1", "SRv6 SID"),
    ("4000::1", "unallocated outside 2000::/3"),
]

ALLOWED = [
    ("8.8.8.8", "public DNS"),
    ("1.1.1.1", "public"),
    ("93.184.215.14", "public web"),
    ("100.63.255.255", "just below CGNAT"),
    ("100.128.0.0", "just above CGNAT"),
    ("172.32.0.1", "just above 172.16/12"),
    ("198.20.0.1", "just above benchmark"),
    ("223.255.255.254", "just below multicast"),
    ("2606:4700:4700::1111", "public IPv6"),
    ("2a00:1450:4001:82b::200e", "public IPv6"),
    ("::ffff:8.8.8.8", "IPv4-mapped public"),
    ("64:ff9b::808:808", "NAT64 of public"),
    ("2002:808:808::1", "6to4 of public"),
]


@pytest.mark.parametrize(("address", "why"), REFUSED, ids=[a for a, _ in REFUSED])
def test_refused(address: str, why: str) -> None:
    assert not is_globally_routable(ipaddress.ip_address(address)), why


@pytest.mark.parametrize(("address", "why"), ALLOWED, ids=[a for a, _ in ALLOWED])
def test_allowed(address: str, why: str) -> None:
    assert is_globally_routable(ipaddress.ip_address(address)), why


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("::ffff:127.0.0.1", "127.0.0.1"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
        ("2002:c0a8:101::1", "192.168.1.1"),
        ("2606:4700:4700::1111", None),
    ],
)
def test_embedded_ipv4(address: str, expected: str | None) -> None:
    result = embedded_ipv4(ipaddress.IPv6Address(address))
    assert result == (ipaddress.IPv4Address(expected) if expected else None)


def test_parse_ip() -> None:
    assert parse_ip("127.0.0.1") == ipaddress.IPv4Address("127.0.0.1")
    assert parse_ip("::1") == ipaddress.IPv6Address("::1")
    assert parse_ip("example.com") is None


def test_rejects_non_address() -> None:
    with pytest.raises(TypeError):
        is_globally_routable("127.0.0.1")  # type: ignore[arg-type]
