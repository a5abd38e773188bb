"""Which IP addresses a public-internet request may reach.

Deny by class, not by list of examples: anything that is not plainly a global unicast address
is refused unless the policy names it. IPv6 forms that embed an IPv4 address (mapped,
compatible, 6to4, NAT64, Teredo) are judged by the IPv4 address they reach, because the
kernel or a translator on the path will deliver them there.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

from runtime.egress._types import IPAddress
from runtime.policy.network import SPECIAL_PURPOSE

__all__ = ["address_class", "embedded_ipv4"]

#: Cloud instance-metadata services: credentials live there, so they get their own name.
_METADATA: frozenset[IPAddress] = frozenset(
    {
        IPv4Address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, DigitalOcean
        IPv4Address("169.254.170.2"),  # AWS ECS task metadata
        IPv4Address("100.100.100.200"),  # Alibaba Cloud
        IPv6Address("fd00:ec2::254"),  # AWS IPv6 IMDS
    }
)
_CGNAT = IPv4Network("100.64.0.0/10")
#: RFC 1918 and IPv6 unique-local: "private" in the everyday sense. ``is_private`` also
#: covers documentation and benchmarking ranges, reported as "non-global" below.
_PRIVATE = (
    IPv4Network("10.0.0.0/8"),
    IPv4Network("172.16.0.0/12"),
    IPv4Network("192.168.0.0/16"),
    IPv6Network("fc00::/7"),
)
_NAT64 = (IPv6Network("64:ff9b::/96"), IPv6Network("64:ff9b:1::/48"))
_IPV4_COMPAT = IPv6Network("::/96")


def embedded_ipv4(ip: IPv6Address) -> tuple[str, IPv4Address] | None:
    """The IPv4 address an IPv6 address reaches through a standard embedding, with its name."""
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip.teredo is not None:
        return "Teredo", ip.teredo[1]
    for net in _NAT64:
        if ip in net:
            return "NAT64", IPv4Address(int(ip) & 0xFFFFFFFF)
    # ``::`` and ``::1`` live in ::/96 too; they are judged as themselves below.
    if ip in _IPV4_COMPAT and int(ip) > 1:
        return "IPv4-compatible", IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_class(ip: IPAddress | str) -> str | None:
    """None for a public unicast address; otherwise a short name of why it is not public
    (``loopback``, ``private``, ``metadata``, ``IPv4-mapped loopback`` ...)."""
    if isinstance(ip, str):
        ip = ip_address(ip)
    if isinstance(ip, IPv6Address):
        if ip.scope_id:
            return "scoped"
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            form, v4 = embedded
            inner = address_class(v4)
            return None if inner is None else f"{form} {inner}"
    if ip in _METADATA:
        return "metadata"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, IPv4Address) and ip in _CGNAT:
        return "carrier-grade NAT"
    if any(ip.version == net.version and ip in net for net in _PRIVATE):
        return "private"
    if ip.is_reserved:
        return "reserved"
    if isinstance(ip, IPv6Address) and ip.is_site_local:
        return "site-local"
    if any(ip.version == net.version and ip in net for net in SPECIAL_PURPOSE):
        return "special-purpose"
    # Documentation, benchmarking, 192.0.0.0/24, 240/4 ...: not routable on the internet.
    if not ip.is_global:
        return "non-global"
    return None
