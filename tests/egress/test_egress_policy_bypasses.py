"""Egress bypasses found by the policy hunt (2026-11-23), run against the real policy
rules (runtime.policy.network.NetworkRules), not the FakeRules double: the gateway and the
policy must judge an address the same way.

- A deny CIDR was only consulted for non-public addresses: with ``allow = ["*"]`` and
  ``deny = ["8.8.8.0/24"]``, a name resolving into the denied range was dialled.
- The policy judged IPv6 forms that embed an IPv4 address (NAT64, 6to4, IPv4-compatible,
  IPv4-translated) as public: the gateway classed ``64:ff9b::a9fe:a9fe`` as "NAT64
  metadata" and then asked the policy, which said yes, so it was dialled. A NAT64 gateway
  on the path (IPv6-only clouds) delivers it to 169.254.169.254.
"""

from __future__ import annotations

import ipaddress

import pytest
from egress_support import CannedBackend, FakeResolver, make_gateway

from runtime.egress import EgressDenied, address_class
from runtime.policy.network import NetworkRules, is_private_address

pytestmark = pytest.mark.anyio

EMBEDDED = [
    "64:ff9b::a9fe:a9fe",  # NAT64 -> 169.254.169.254
    "64:ff9b::7f00:1",  # NAT64 -> 127.0.0.1
    "64:ff9b:1::a00:5",  # local-use NAT64 -> 10.0.0.5
    "2002:7f00:1::",  # 6to4 -> 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 -> 169.254.169.254
    "::127.0.0.1",  # IPv4-compatible
    "::a9fe:a9fe",
    "::ffff:0:7f00:1",  # IPv4-translated (SIIT)
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo -> 127.0.0.1
]


@pytest.mark.parametrize("address", EMBEDDED)
def test_policy_and_gateway_agree_on_embedded_ipv4(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert address_class(ip) is not None
    assert is_private_address(ip)
    rules = NetworkRules(allow=["*"])
    assert not rules.address_allowed("any.example", ip)
    verdict = rules.check("http", f"[{address}]", 80)
    assert not verdict.allowed
    assert verdict.rule == "network.private"


# Ranges the two classifiers disagreed on (found by a red-team pass): site-local, reserved,
# and special-purpose ranges newer than this Python's tables.
SPECIAL = [
    "fec0::1",
    "feff::1",
    "5f00::1",
    "100:0:0:1::1",
    "3fff::1",
    "192.88.99.1",
    "192.31.196.1",
    "192.52.193.1",
    "192.175.48.1",
]


@pytest.mark.parametrize("address", SPECIAL)
def test_policy_and_gateway_agree_on_special_ranges(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert address_class(ip) is not None
    assert is_private_address(ip)
    assert not NetworkRules(allow=["*"]).address_allowed("any.example", ip)


def test_a_port_bound_entry_opens_only_its_port() -> None:
    """'localhost:8080' with allow_private names that port: beside '*' (which passes the
    name's check on any port) it did open 'localhost:9999' to 127.0.0.1."""
    rules = NetworkRules(allow=["localhost:8080", "*"], allow_private=True)
    loopback = ipaddress.ip_address("127.0.0.1")
    assert rules.address_allowed("localhost", loopback, 8080)
    assert not rules.address_allowed("localhost", loopback, 9999)
    assert rules.check("http", "localhost", 9999).allowed  # the '*' passes the name ...
    literal = NetworkRules(allow=["127.0.0.1:8080", "*"])
    assert literal.address_allowed("127.0.0.1", loopback, 8080)
    assert not literal.address_allowed("127.0.0.1", loopback, 9999)


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "2606:2800:220:1:248:1893:25c8:1946",
        "2002:5db8:d822::1",
        "64:ff9b::808:808",
    ],
)
def test_public_addresses_stay_public(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert address_class(ip) is None
    assert not is_private_address(ip)
    assert NetworkRules(allow=["*"]).address_allowed("any.example", ip)


@pytest.mark.parametrize("address", EMBEDDED)
async def test_gateway_refuses_a_name_resolving_to_an_embedded_private_address(
    address: str,
) -> None:
    rules = NetworkRules(allow=["*"])
    canned = CannedBackend()
    resolver = FakeResolver({"nat64.example": [[address]]})
    async with make_gateway(rules, canned, resolver) as gw:
        with pytest.raises(EgressDenied) as info:
            await gw.handle("http", {"url": "http://nat64.example/"})
    assert info.value.details["rule"] == "egress.address"
    assert canned.dialled == []


async def test_deny_cidr_applies_to_public_addresses_behind_a_name() -> None:
    rules = NetworkRules(allow=["*"], deny=["93.184.216.0/24"])
    canned = CannedBackend()
    resolver = FakeResolver({"denied.example": [["93.184.216.34"]]})
    async with make_gateway(rules, canned, resolver) as gw:
        with pytest.raises(EgressDenied) as info:
            await gw.handle("http", {"url": "http://denied.example/"})
    assert info.value.details["rule"] == "egress.address"
    assert canned.dialled == []


async def test_deny_cidr_leaves_other_public_addresses_alone() -> None:
    rules = NetworkRules(allow=["*"], deny=["93.184.216.0/24"])
    canned = CannedBackend()
    resolver = FakeResolver({"fine.example": [["93.184.217.1"]]})
    async with make_gateway(rules, canned, resolver) as gw:
        reply = await gw.handle("http", {"url": "http://fine.example/"})
    assert reply["body"] == b"canned"
    assert canned.dialled == [("93.184.217.1", 80)]


async def test_gateway_keeps_a_port_bound_private_entry_to_its_port() -> None:
    """The red-team run: 'svc.corp.internal:8080' and '*.corp.internal' with allow_private,
    a name resolving to a private address: port 9999 was dialled through the wildcard."""
    rules = NetworkRules(allow=["svc.corp.internal:8080", "*.corp.internal"], allow_private=True)
    canned = CannedBackend()
    resolver = FakeResolver({"svc.corp.internal": [["10.0.0.7"]]})
    async with make_gateway(rules, canned, resolver) as gw:
        reply = await gw.handle("http", {"url": "http://svc.corp.internal:8080/"})
        assert reply["body"] == b"canned"
        with pytest.raises(EgressDenied) as info:
            await gw.handle("http", {"url": "http://svc.corp.internal:9999/"})
    assert info.value.details["rule"] == "egress.address"
    assert canned.dialled == [("10.0.0.7", 8080)]


# Public IPv4 8.8.8.8 as each IPv6 form embeds it (red-team finding E2: with deny
# 8.8.8.0/24, 'http://[64:ff9b::808:808]/' was allowed and dialled).
EMBEDDING_8888 = [
    "64:ff9b::808:808",  # NAT64
    "64:ff9b:1::808:808",  # local-use NAT64
    "2002:808:808::1",  # 6to4
    "::8.8.8.8",  # IPv4-compatible
    "::ffff:0:808:808",  # IPv4-translated
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo, client 8.8.8.8
    "2001:0:808:808::1",  # Teredo, server 8.8.8.8
]


@pytest.mark.parametrize("address", EMBEDDING_8888)
async def test_deny_cidr_covers_embedded_ipv4_literals(address: str) -> None:
    rules = NetworkRules(allow=["*"], deny=["8.8.8.0/24"])
    verdict = rules.check("http", f"[{address}]", 80)
    assert not verdict.allowed and verdict.rule == "network.deny", verdict
    assert not rules.address_allowed(address, ipaddress.ip_address(address))
    canned = CannedBackend()
    async with make_gateway(rules, canned, FakeResolver()) as gw:
        with pytest.raises(EgressDenied) as info:
            await gw.handle("http", {"url": f"http://[{address}]/"})
    assert info.value.details["rule"] == "network.deny"
    assert canned.dialled == []


@pytest.mark.parametrize("address", EMBEDDING_8888)
async def test_deny_cidr_covers_embedded_ipv4_behind_a_name(address: str) -> None:
    rules = NetworkRules(allow=["*"], deny=["8.8.8.0/24"])
    canned = CannedBackend()
    resolver = FakeResolver({"aaaa.example": [["93.184.217.1", address]]})
    async with make_gateway(rules, canned, resolver) as gw:
        with pytest.raises(EgressDenied) as info:
            await gw.handle("http", {"url": "http://aaaa.example/"})
    assert info.value.details["rule"] == "egress.address"
    assert info.value.details["address"] == str(ipaddress.ip_address(address))
    assert canned.dialled == []


async def test_embedded_addresses_outside_the_deny_cidr_pass() -> None:
    rules = NetworkRules(allow=["*"], deny=["8.8.8.0/24"])
    canned = CannedBackend()
    resolver = FakeResolver({"aaaa.example": [["64:ff9b::808:404"]]})
    async with make_gateway(rules, canned, resolver) as gw:
        reply = await gw.handle("http", {"url": "http://aaaa.example/"})
        assert reply["body"] == b"canned"
        reply = await gw.handle("http", {"url": "http://[64:ff9b::808:404]/"})
        assert reply["body"] == b"canned"
    assert canned.dialled == [("64:ff9b::808:404", 80)] * 2


def test_an_ipv4_allow_entry_does_not_open_its_embeddings() -> None:
    """Allow entries match the address as dialled: an IPv6 form goes to a translator on the
    path, not to the host the IPv4 entry names. Naming the IPv6 address opens it."""
    rules = NetworkRules(allow=["8.8.8.8", "10.0.0.5"])
    assert rules.check("http", "8.8.8.8", 80).allowed
    for address in ("64:ff9b::808:808", "2002:808:808::1"):
        assert rules.check("http", f"[{address}]", 80).rule == "network.default"
    assert rules.check("http", "[64:ff9b::a00:5]", 80).rule == "network.private"
    named = NetworkRules(allow=["64:ff9b::808:808"], deny=["8.8.4.0/24"])
    assert named.check("http", "[64:ff9b::808:808]", 80).allowed
    assert named.address_allowed("64:ff9b::808:808", ipaddress.ip_address("64:ff9b::808:808"))
    # ... and deny still wins over an IPv6 allow entry, by the embedded address.
    both = NetworkRules(allow=["64:ff9b::/96"], deny=["8.8.4.0/24"])
    assert both.check("http", "[64:ff9b::808:808]", 80).allowed
    assert both.check("http", "[64:ff9b::808:404]", 80).rule == "network.deny"
