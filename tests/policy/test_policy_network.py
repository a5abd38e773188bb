from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from runtime.errors import PolicyError
from runtime.policy import Policy
from runtime.policy.network import NetworkRules, is_private_address

RULES = NetworkRules(
    allow=[
        "example.com",
        "*.allowed.com",
        "api.x.io:8443",
        "127.0.0.1:8080",
        "10.1.0.0/16",
        "8.8.8.8",
        "db.internal",
    ],
    deny=["bad.allowed.com", "*.evil.allowed.com"],
)


@pytest.mark.parametrize(
    ("scheme", "host", "port", "allowed", "rule"),
    [
        ("https", "example.com", 443, True, "network.allow"),
        ("https", "example.com.", 443, True, "network.allow"),
        ("https", "EXAMPLE.COM", 443, True, "network.allow"),
        ("https", "www.example.com", 443, False, "network.default"),
        ("https", "a.allowed.com", 443, True, "network.allow"),
        ("https", "a.b.allowed.com", 443, True, "network.allow"),
        ("https", "allowed.com", 443, False, "network.default"),
        ("https", "allowed.com.evil.com", 443, False, "network.default"),
        ("https", "evilallowed.com", 443, False, "network.default"),
        ("https", "bad.allowed.com", 443, False, "network.deny"),
        ("https", "x.evil.allowed.com", 443, False, "network.deny"),
        ("https", "evil.allowed.com", 443, False, "network.deny"),
        ("https", "api.x.io", 8443, True, "network.allow"),
        ("https", "api.x.io", 443, False, "network.default"),
        ("http", "127.0.0.1", 8080, True, "network.allow"),
        ("http", "127.0.0.1", 6379, False, "network.private"),
        ("http", "127.0.0.2", 8080, False, "network.private"),
        ("http", "10.1.2.3", 80, True, "network.allow"),
        ("http", "10.2.0.1", 80, False, "network.private"),
        ("http", "169.254.169.254", 80, False, "network.private"),
        ("http", "[::1]", 80, False, "network.private"),
        ("http", "::ffff:127.0.0.1", 8080, True, "network.allow"),
        ("http", "8.8.8.8", 80, True, "network.allow"),
        ("http", "0x7f000001", 80, False, "network.invalid-host"),
        ("http", "2130706433", 80, False, "network.invalid-host"),
        ("http", "127.1", 80, False, "network.invalid-host"),
        ("http", "0177.0.0.1", 80, False, "network.invalid-host"),
        ("ftp", "example.com", 21, False, "network.scheme"),
        ("gopher", "example.com", 70, False, "network.scheme"),
        ("http", "exa mple.com", 80, False, "network.invalid-host"),
        ("http", "", 80, False, "network.invalid-host"),
    ],
)
def test_check(scheme: str, host: str, port: int, allowed: bool, rule: str) -> None:
    v = RULES.check(scheme, host, port)
    assert (v.allowed, v.rule) == (allowed, rule), v
    assert v.reason


def test_ports_and_schemes() -> None:
    rules = NetworkRules(allow=["*"], ports=[443], schemes=["https"])
    assert rules.check("https", "anything.org", 443).allowed
    assert rules.check("https", "anything.org", 80).rule == "network.port"
    assert rules.check("http", "anything.org", 443).rule == "network.scheme"
    # '*' never reaches private addresses.
    assert rules.check("https", "127.0.0.1", 443).rule == "network.private"
    assert not rules.address_allowed("anything.org", ipaddress.ip_address("10.0.0.1"))
    assert rules.address_allowed("anything.org", ipaddress.ip_address("93.184.216.34"))


def test_address_allowed() -> None:
    ip = ipaddress.ip_address
    # A public name resolving to loopback (rebinding) is refused.
    assert not RULES.address_allowed("example.com", ip("127.0.0.1"))
    assert RULES.address_allowed("example.com", ip("93.184.216.34"))
    assert RULES.address_allowed("127.0.0.1", ip("127.0.0.1"))
    assert RULES.address_allowed("10.1.9.9", ip("10.1.9.9"))
    assert RULES.address_allowed("::ffff:10.1.9.9", ip("::ffff:10.1.9.9"))
    # An IP entry does not let other names resolve to it.
    assert not RULES.address_allowed("a.allowed.com", ip("10.1.9.9"))
    # Exact host names reach private space only with allow_private.
    assert not RULES.address_allowed("db.internal", ip("10.9.0.1"))
    private = NetworkRules(allow=["db.internal", "*.corp"], allow_private=True)
    assert private.address_allowed("db.internal", ip("10.9.0.1"))
    assert not private.address_allowed("x.corp", ip("10.9.0.1"))
    # A CIDR that covers public space grants public addresses only.
    wide = NetworkRules(allow=["0.0.0.0/1"])
    assert wide.check("http", "8.8.8.8", 80).allowed
    assert not wide.check("http", "127.0.0.1", 80).allowed
    assert not wide.address_allowed("127.0.0.1", ip("127.0.0.1"))
    denied = NetworkRules(allow=["10.0.0.0/8"], deny=["10.0.0.5"])
    assert not denied.address_allowed("10.0.0.5", ip("10.0.0.5"))
    assert denied.address_allowed("10.0.0.6", ip("10.0.0.6"))
    assert not denied.check("http", "10.0.0.5", 80).allowed


def test_is_private_address() -> None:
    for a in (
        "127.0.0.1",
        "10.0.0.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "0.0.0.0",
        "100.64.0.1",
        "::ffff:192.168.0.1",
        "224.0.0.1",
    ):
        assert is_private_address(ipaddress.ip_address(a)), a
    assert not is_private_address(ipaddress.ip_address("1.1.1.1"))


@pytest.mark.parametrize(
    "entry", ["bad host", "*x.com", "a:b:c:d:e:f:g:h:i", "1.2.3.4/99", "x.com:99999", ""]
)
def test_bad_entries_are_rejected(entry: str) -> None:
    with pytest.raises(ValidationError):
        NetworkRules(allow=[entry])


def test_defaults() -> None:
    rules = NetworkRules()
    assert rules.schemes == ["https", "http"]
    assert rules.max_response_bytes == 10 * 1024 * 1024
    assert rules.timeout_s == 60
    assert not rules.check("https", "example.com", 443).allowed


def test_copies_and_edits_are_recompiled() -> None:
    base = NetworkRules(allow=["a.com"])
    copy = base.model_copy(update={"allow": ["b.com"]})
    assert copy.check("https", "b.com", 443).allowed
    assert not copy.check("https", "a.com", 443).allowed
    base.deny.append("a.com")
    assert base.check("https", "a.com", 443).rule == "network.deny"


@pytest.mark.parametrize(
    ("network", "says"),
    [
        ('allow = ["*"]\nsearch_endpoint = "not a url"', "is not a usable URL"),
        ('allow = ["*"]\nsearch_endpoint = "search.example/x"', "URL has no host"),
        ('allow = ["*"]\nsearch_endpoint = "ftp://search.example/x"', "http or https URL"),
        (
            'allow = ["example.com"]\nsearch_endpoint = "http://127.0.0.1:8090/search"',
            "refused by these [network] rules (network.private",
        ),
        (
            'allow = ["search.example"]\nsearch_endpoint = "https://other.example/s"',
            "(network.default",
        ),
        (
            'allow = ["*"]\ndeny = ["*.example"]\nsearch_endpoint = "https://s.example/s"',
            "(network.deny",
        ),
        (
            'allow = ["*"]\nports = [443]\nsearch_endpoint = "http://s.example:8080/s"',
            "(network.port",
        ),
    ],
)
def test_a_search_endpoint_web_search_could_never_reach_is_refused_at_load(
    network: str, says: str
) -> None:
    """It loaded, web_search was decided allow, and every call failed policy_denied."""
    text = f"version = 1\n\n[network]\n{network}\n"
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(text, "p.toml")
    assert info.value.details["field"] == "network.search_endpoint"
    assert info.value.details["line"] == text.count("\n")  # its own line, the last
    assert says in info.value.message


def test_a_search_endpoint_the_rules_allow_loads() -> None:
    for network in (
        'allow = ["127.0.0.1:8090"]\nsearch_endpoint = "http://127.0.0.1:8090/search"',
        'allow = ["*.example"]\nsearch_endpoint = "https://search.example/s?n=5"',
    ):
        policy = Policy.from_toml(f"version = 1\n[network]\n{network}\n")
        assert policy.document.network.search_endpoint is not None


# A denial quoted a caller's whole scheme or host (a custom tool's url argument has no
# schema length limit): each is cut to its first 64 characters, its length said.
@pytest.mark.parametrize(
    ("scheme", "host", "rule"),
    [
        ("f" * 300_000, "example.com", "network.scheme"),
        ("https", "a b" * 100_000, "network.invalid-host"),
        ("https", "a." * 150_000 + "com", "network.default"),
        ("https", "a." * 150_000 + "evil.allowed.com", "network.deny"),
    ],
)
def test_a_long_scheme_or_host_is_quoted_cut(scheme: str, host: str, rule: str) -> None:
    v = RULES.check(scheme, host, 443)
    assert (v.allowed, v.rule) == (False, rule)
    assert "… (300" in v.reason and len(v.reason) < 200
