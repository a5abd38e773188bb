"""Fuzzing the egress URL check (runtime/egress). Differential oracle: the host the check saw
is the host the client connects to. The gateway connects to ``parse_target(url)``'s pinned
address and sends ``target.url``; the property is that this serialisation means the same
origin to httpx (the client), and that the original string, wherever httpx would read it at
all, names the same host and port. Address encodings are compared with the C library's
``inet_aton`` (what ``connect`` would reach) and must be classed non-public when they are."""

from __future__ import annotations

import ipaddress
import socket

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

egress = pytest.importorskip("runtime.egress")
EgressDenied = egress.EgressDenied
parse_target = egress.parse_target
parse_ipv4_host = egress.parse_ipv4_host
address_class = egress.address_class

HOSTS = [
    "127.0.0.1",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "127.1",
    "0x7f.1",
    "0",
    "0.0.0.0",
    "localhost",
    "LOCALHOST",
    "localhost.",
    "example.org",
    "EXAMPLE.org.",
    "allowed.test",
    "allowed.test.evil.test",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0::1]",
    "169.254.169.254",
    "2852039166",
    "[fd00:ec2::254]",
    "\u2460\u2461\u2467.0.0.1",
    "127\u30020\u30020\u30021",
    "b\u00fccher.example",
    "xn--bcher-kva.example",
    "a..b",
    "-a.example",
    "a_b.example",
    "",
    "[",
    "[::1",
    "1.2.3.4.5",
    "256.1.1.1",
    "08.0.0.1",
    "0x.0x.0x.0x",
    "1e1",
    "%31%32%37.0.0.1",
]
PREFIX = ["", " ", "\t", "\u0001", "\u200b"]
SCHEME = [
    "http://",
    "https://",
    "HTTP://",
    "hTtP://",
    "http:/",
    "http:",
    "//",
    "file://",
    "gopher://",
    "http:\\\\",
    "ftp://",
]
USERINFO = ["", "a@", "a:b@", "allowed.test@", "@", "allowed.test:80@", "a%40b@"]
PORT = ["", ":80", ":8080", ":", ":0", ":65535", ":65536", ":0x50", ":+80", ": 80", ":8\u0668"]
TAIL = [
    "",
    "/",
    "/p?q=1",
    "#frag",
    "?@evil.test",
    "#@evil.test",
    "\\@evil.test",
    "/..;/x",
    "/%2e%2e/",
    "@evil.test",
    "\\\\evil.test",
]


@st.composite
def urls(draw):
    return (
        draw(st.sampled_from(PREFIX))
        + draw(st.sampled_from(SCHEME))
        + draw(st.sampled_from(USERINFO))
        + draw(st.sampled_from(HOSTS))
        + draw(st.sampled_from(PORT))
        + draw(st.sampled_from(TAIL))
    )


def _same_host(checked, client_host: str) -> bool:
    if checked.address is not None:
        try:
            return ipaddress.ip_address(client_host.strip("[]")) == checked.address
        except ValueError:
            try:
                return parse_ipv4_host(client_host) == checked.address
            except ValueError:
                return False
    return client_host.rstrip(".").lower() == checked.host


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(urls())
@example("http://127.0.0.1:6666\\@1.1.1.1")
@example("http://allowed.test@127.0.0.1/")
@example(" http://127.0.0.1/")
@example("http://127.0.0.1#@allowed.test/")
def test_the_checked_host_is_the_connected_host(url):
    try:
        t = parse_target(url)
    except EgressDenied:
        return
    assert t.scheme in ("http", "https")
    # what the gateway sends: target.url, to the pinned address of target.host
    sent = httpx.URL(t.url)
    assert _same_host(t, sent.raw_host.decode()), (url, t, sent.raw_host)
    assert (sent.port or {"http": 80, "https": 443}[sent.scheme]) == t.port, (url, t)
    # the original string, read by the client, names the same origin
    try:
        orig = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        return
    if orig.scheme in ("http", "https") and orig.raw_host:
        assert _same_host(t, orig.raw_host.decode()), (url, t, orig.raw_host)
        assert (orig.port or {"http": 80, "https": 443}[orig.scheme]) == t.port, (url, t)


def _encode_part(value: int, style: str) -> str:
    return {"dec": str(value), "hex": hex(value), "oct": "0" + oct(value)[2:]}[style]


@st.composite
def ipv4_forms(draw):
    """A non-public IPv4 address and an inet_aton spelling of it (1-4 parts, mixed bases)."""
    net = draw(
        st.sampled_from(
            [
                "127.0.0.0/8",
                "10.0.0.0/8",
                "172.16.0.0/12",
                "192.168.0.0/16",
                "169.254.0.0/16",
                "0.0.0.0/8",
                "100.64.0.0/10",
            ]
        )
    )
    network = ipaddress.ip_network(net)
    ip = network[draw(st.integers(0, network.num_addresses - 1))]
    b = ip.packed
    nparts = draw(st.integers(1, 4))
    if nparts == 1:
        values = [int(ip)]
    elif nparts == 2:
        values = [b[0], int.from_bytes(b[1:], "big")]
    elif nparts == 3:
        values = [b[0], b[1], int.from_bytes(b[2:], "big")]
    else:
        values = list(b)
    styles = draw(
        st.lists(st.sampled_from(["dec", "hex", "oct"]), min_size=nparts, max_size=nparts)
    )
    return ip, ".".join(_encode_part(v, s) for v, s in zip(values, styles, strict=True))


@settings(max_examples=500, deadline=None)
@given(ipv4_forms())
def test_every_spelling_of_a_private_address_is_caught(form):
    ip, text = form
    assert socket.inet_aton(text) == ip.packed  # what connect() would reach
    assert parse_ipv4_host(text) == ip
    assert address_class(ip) is not None, ip
    t = parse_target(f"http://{text}:8080/")
    assert t.address == ip and address_class(t.address) is not None
    mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
    assert address_class(mapped) is not None


@pytest.mark.parametrize(
    "url",
    [
        "http://example.org/",
        "https://EXAMPLE.org.:8443/p?q",
        "http://2130706433:8080/",
        "http://[::ffff:127.0.0.1]/",
        "http://b\u00fccher.example/",
    ],
)
def test_the_property_is_not_vacuous(url):
    # accepted URLs exist in the generated space and pass through the same comparison
    test_the_checked_host_is_the_connected_host.hypothesis.inner_test(url)
    parse_target(url)
