"""The strict URL parser and the differential property: the host the policy saw is the host
the gateway dialled."""

from __future__ import annotations

import socket
from ipaddress import IPv4Address, ip_address
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from egress_support import CannedBackend, FakeResolver, FakeRules, make_gateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.egress import EgressDenied, address_class, parse_ipv4_host, parse_target
from runtime.errors import InvalidArguments

PUBLIC = "93.184.216.34"


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0x7F.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("127.1.", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("0x", "0.0.0.0"),
        ("4294967295", "255.255.255.255"),
        ("0xa9.0376.43518", "169.254.169.254"),
        ("example.com", None),
        ("1.2.3.x4", None),
    ],
)
def test_ipv4_numeric_forms(host: str, expected: str | None) -> None:
    result = parse_ipv4_host(host)
    assert (None if result is None else str(result)) == expected


@pytest.mark.parametrize(
    "host",
    [
        "08.0.0.1",
        "256.0.0.1",
        "1.2.3.4.5",
        "4294967296",
        "0x100000000",
        "1.2.65536",
        "foo.123",
        "1..2",
    ],
)
def test_ipv4_numeric_invalid(host: str) -> None:
    with pytest.raises(ValueError):
        parse_ipv4_host(host)


_part = st.one_of(
    st.integers(0, 2**32 - 1).map(str),
    st.integers(0, 2**32 - 1).map(lambda n: f"0{n:o}"),
    st.integers(0, 2**32 - 1).map(lambda n: f"0x{n:x}"),
)


@given(st.lists(_part, min_size=1, max_size=4).map(".".join))
def test_ipv4_parse_agrees_with_inet_aton(host: str) -> None:
    try:
        libc: str | None = socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        libc = None
    try:
        ours: str | None = str(parse_ipv4_host(host))
    except ValueError:
        ours = None
    assert ours == libc


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6666\\@1.1.1.1",
        "http://1.1.1.1 &@127.0.0.1# @3.3.3.3/",
        " http://127.0.0.1/",  # CVE-2023-24329
        "\thttp://127.0.0.1/",
        "http://allowed.com@evil.com/",
        "http://allowed.com%2f@evil.com/",
        "http://evil.com%00.allowed.com/",
        "http://evil.com%2eallowed.com/",
        "http://evil.com\tallowed.com/",
        "http://example.com\r\nHost: evil/",
        "http://a.com:80:80/",
        "http://[::1]x/",
        "http://[::1/",
        "http://[fe80::1%25eth0]/",
        "http://example.com:0/",
        "http://example.com:65536/",
        "http://example.com:+80/",
        "http://example.com:/",
        "http://xn--zz/",
        "http://exa mple.com/",
        "http:/example.com/",
        "http:example.com/",
        "http:\\\\example.com/",
        "http:///path",
        "http://example.com../",
        "http://-bad.example/",
        "http://exa$mple.com/",
        "http://256.0.0.1/",
        "http://1.2.3.4.5/",
        "http://foo.123/",
        "http://example.com\u200b/",
        "http://example.com\x85/",
        "//example.com/",
        "example.com",
        "",
    ],
)
def test_hostile_urls_refused(url: str) -> None:
    with pytest.raises(EgressDenied):
        parse_target(url)


@pytest.mark.parametrize(
    ("url", "host", "port", "target"),
    [
        ("HTTP://Example.COM/A?b=1#frag", "example.com", 80, "/A?b=1"),
        ("https://example.com./", "example.com", 443, "/"),
        ("http://example.com?q", "example.com", 80, "/?q"),
        ("http://evil.com#@allowed.com/", "evil.com", 80, "/"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:7f00:1", 80, "/"),
        ("http://b\u00fccher.de:8080/x", "xn--bcher-kva.de", 8080, "/x"),
        ("http://\u0411\u0426.example/", "xn--90a6b.example", 80, "/"),
        ("http://127.0.0.1:6666/", "127.0.0.1", 6666, "/"),
        ("http://under_score.example/", "under_score.example", 80, "/"),
        ("http://example.com/a%20b/\u00e9", "example.com", 80, "/a%20b/\u00e9"),
    ],
)
def test_accepted_urls(url: str, host: str, port: int, target: str) -> None:
    parsed = parse_target(url)
    assert (parsed.host, parsed.port, parsed.target) == (host, port, target)
    # The canonical URL means the same to httpx and urllib as to us.
    assert httpx.URL(parsed.url).raw_host.decode() == host
    assert (urlsplit(parsed.url).hostname or "") == host
    assert parse_target(parsed.url) == parsed


def test_address_classes_public() -> None:
    assert address_class("93.184.216.34") is None
    assert address_class("2606:2800:220:1:248:1893:25c8:1946") is None
    assert address_class("::ffff:93.184.216.34") is None
    assert address_class("2002:5db8:d822::") is None  # 6to4 of a public address
    assert address_class(IPv4Address("192.0.2.1")) == "non-global"  # TEST-NET-1


# -------------------------------------------------------------------------------------------
# Differential property through the whole gateway.

_hosts = st.one_of(
    st.sampled_from(
        [
            "127.0.0.1",
            "2130706433",
            "0x7f.1",
            "127.1",
            "0177.0.0.1",
            "[::ffff:127.0.0.1]",
            "[::1]",
            "1.1.1.1",
            "8.8.8.8",
            "example.com",
            "EXAMPLE.com.",
            "b\u00fccher.de",
            "xn--bcher-kva.de",
            "localhost",
            "169.254.169.254",
            "allowed.com.evil.com",
            "\uff11\uff12\uff17\u3002\uff10\u3002\uff10\u3002\uff11",
            "[2606:4700::1111]",
            "a.example",
            "x-y.example.org",
            "93.184.216.34",
        ]
    ),
    st.text(alphabet="abcx.01279f:@[]\\%#?/ \t\r\n-_\u3002\uff0e", min_size=0, max_size=16),
)
_urls = st.builds(
    lambda scheme, user, host, port, tail: scheme + user + host + port + tail,
    # Weighted towards well-formed pieces so that both outcomes are exercised.
    st.sampled_from(
        ["http://"] * 4
        + [
            "https://",
            "HTTP://",
            " http://",
            "http:/",
            "http:\\\\",
            "file://",
            "gopher://",
            "http:///",
        ]
    ),
    st.sampled_from([""] * 6 + ["user@", "a:b@", "1.1.1.1\\@", "x#@"]),
    _hosts,
    st.sampled_from([""] * 4 + [":80", ":8080", ":", ":0", ":99999", ":80\\@1.1.1.1", " :81"]),
    st.one_of(
        st.sampled_from(["", "/", "/a?b=1", "/#x", "?q", "/p@x", "/%41", "#@evil.com"]),
        st.text(alphabet="/?#@\\% aZ.:\u00e9", max_size=12),
    ),
)


async def _run(url: str) -> tuple[FakeRules, FakeResolver, CannedBackend, Exception | None]:
    rules, resolver, canned = FakeRules(), FakeResolver(default=PUBLIC), CannedBackend()
    error: Exception | None = None
    async with make_gateway(rules, canned, resolver) as gw:
        try:
            await gw.handle("http", {"url": url})
        except (EgressDenied, InvalidArguments) as exc:
            error = exc
    return rules, resolver, canned, error


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_urls)
def test_host_checked_is_host_dialled(url: str) -> None:
    rules, resolver, canned, error = anyio.run(_run, url)
    if error is not None:
        assert canned.dialled == []  # refused before any connection
        return
    assert len(rules.seen) == 1
    _scheme, host, port = rules.seen[0]
    parsed = parse_target(url)
    assert (parsed.host, parsed.port) == (host, port)
    if parsed.address is not None:
        assert resolver.calls == []
        assert [ip_address(d) for d, _ in canned.dialled] == [parsed.address]
    else:
        assert resolver.calls == [host]
        assert canned.dialled == [(PUBLIC, port)]
    shown = f"[{host}]" if ":" in host else host
    request_head = canned.streams[0].written.split(b"\r\n\r\n")[0].decode("ascii")
    host_line = next(line for line in request_head.split("\r\n") if line.startswith("Host: "))
    value = host_line.removeprefix("Host: ")
    sent = value[: value.index("]") + 1] if value.startswith("[") else value.partition(":")[0]
    assert sent == shown


def test_idna_implementation_named() -> None:
    from runtime.egress import IDNA_IMPLEMENTATION

    assert IDNA_IMPLEMENTATION.startswith("idna ")


@pytest.mark.parametrize(
    ("url", "host"),
    [("http://b\u00fccher.de/", "xn--bcher-kva.de"), ("http://EXAMPLE.com/", "example.com")],
)
def test_stdlib_idna_fallback(monkeypatch: pytest.MonkeyPatch, url: str, host: str) -> None:
    import runtime.egress._url as url_module

    monkeypatch.setattr(url_module, "_idna", None)
    assert parse_target(url).host == host
    with pytest.raises(EgressDenied):
        parse_target("http://xn--zz/")
