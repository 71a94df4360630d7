"""Is this address one the gateway may connect to on a user's behalf?

The fetcher asks once per resolved address, on every redirect hop, before connecting: a
user-supplied URL must never reach loopback, the private network, the cloud metadata service
(169.254.169.254) or anything else that is not a public unicast host (SSRF).

The tables are explicit on purpose. Python's ``ipaddress.is_global`` changed between patch
releases and still calls multicast ``224.0.0.1`` and the 6to4 wrapper of ``127.0.0.1`` global,
so it serves only as a second opinion for IPv4. IPv6 is an allow-list: only global unicast
(2000::/3) minus its special blocks, plus the two wrappers whose embedded IPv4 address is what
the packet really reaches (IPv4-mapped and well-known NAT64), judged by that address.

DNS resolution, pinning the connection to the checked address and redirects are the fetcher's job.
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

__all__ = ["embedded_ipv4", "is_globally_routable", "parse_ip"]

_REFUSED_V4: tuple[IPv4Network, ...] = tuple(
    IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # "this network"; 0.0.0.0 reaches the local host on Linux
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # carrier-grade NAT, shared address space
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, incl. the cloud metadata service 169.254.169.254
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments (DS-Lite, NAT64 discovery, ...)
        "192.0.2.0/24",  # documentation TEST-NET-1
        "192.88.99.0/24",  # deprecated 6to4 relay anycast
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation TEST-NET-2
        "203.0.113.0/24",  # documentation TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, incl. broadcast 255.255.255.255
    )
)

_GLOBAL_UNICAST_V6 = IPv6Network("2000::/3")

_REFUSED_V6: tuple[IPv6Network, ...] = tuple(
    IPv6Network(net)
    for net in (
        "2001::/23",  # IETF protocol assignments, incl. Teredo 2001::/32, ORCHID, benchmarking
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4: judged by its embedded address below, never as a whole
        "3fff::/20",  # documentation (RFC 9637)
    )
)

_IPV4_MAPPED = IPv6Network("::ffff:0:0/96")
_NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = IPv6Network("2002::/16")


def embedded_ipv4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address delivers to, for the wrappers that embed one.

    IPv4-mapped (``::ffff:a.b.c.d``), well-known NAT64 (``64:ff9b::a.b.c.d``) and 6to4
    (``2002:AABB:CCDD::``) packets end up at the embedded IPv4 host, so that host is what must
    be judged. Returns None for every other address.
    """
    if ip in _IPV4_MAPPED or ip in _NAT64_WELL_KNOWN:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIX_TO_FOUR:
        return ip.sixtofour
    return None


def _ipv4_is_routable(ip: IPv4Address) -> bool:
    """Public unicast IPv4: outside every refused block, and global by Python's table too."""
    return not any(ip in net for net in _REFUSED_V4) and ip.is_global


def _ipv6_is_routable(ip: IPv6Address) -> bool:
    """Public unicast IPv6, judging the embedded IPv4 host of mapped, NAT64 and 6to4 forms.

    Everything outside 2000::/3 is refused: loopback, unspecified, IPv4-compatible (::/96),
    link-local, unique-local, site-local, multicast, discard, NAT64 local-use
    (64:ff9b:1::/48) and SRv6 SIDs all live there.
    """
    if ip.scope_id:
        return False  # a zone index only makes sense for link-local destinations
    embedded = embedded_ipv4(ip)
    if embedded is not None:
        return _ipv4_is_routable(embedded)
    if ip not in _GLOBAL_UNICAST_V6:
        return False
    return not any(ip in net for net in _REFUSED_V6)


def is_globally_routable(ip: IPv4Address | IPv6Address) -> bool:
    """True only for a public unicast address the gateway may fetch media from."""
    if isinstance(ip, IPv4Address):
        return _ipv4_is_routable(ip)
    if isinstance(ip, IPv6Address):
        return _ipv6_is_routable(ip)
    raise TypeError(f"expected an IPv4Address or IPv6Address, got {type(ip).__name__}")


def parse_ip(text: str) -> IPv4Address | IPv6Address | None:
    """The address in ``text`` (an IP literal, maybe with an IPv6 zone), else None."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
