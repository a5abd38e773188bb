"""The egress gateway against local servers (127.0.0.1 only) and canned public addresses."""

from __future__ import annotations

import gzip
import json
from urllib.parse import quote

import pytest
from egress_support import (
    CannedBackend,
    FakeResolver,
    FakeRules,
    RecordingBackend,
    Server,
    make_gateway,
    redirect_response,
)

from runtime.egress import EgressDenied, EgressGateway
from runtime.errors import InvalidArguments, PolicyDenied, ToolFailed, ToolTimeout

pytestmark = pytest.mark.anyio


def local_rules(**kw: object) -> FakeRules:
    return FakeRules(named={"127.0.0.1"}, **kw)  # type: ignore[arg-type]


async def test_get_named_loopback(server: Server) -> None:
    rec = RecordingBackend()
    async with make_gateway(local_rules(), rec) as gw:
        reply = await gw.handle("http", {"url": f"{server.base}/hello"})
    assert reply["status"] == 200
    assert reply["body"] == b"hello"
    assert reply["truncated"] is False
    assert reply["headers"]["x-server"] == "public"
    assert reply["url"] == f"{server.base}/hello"
    assert reply["redirects"] == []
    assert rec.dialled == [("127.0.0.1", server.server_address[1])]


async def test_default_system_resolver_and_transport(server: Server) -> None:
    # No injected resolver or transport: the real getaddrinfo path and PinnedTransport.
    async with EgressGateway(FakeRules(named={"localhost"})) as gw:
        reply = await gw.handle(
            "http", {"url": f"http://localhost:{server.server_address[1]}/hello"}
        )
    assert reply["body"] == b"hello"


async def test_post_body_and_headers(server: Server) -> None:
    payload = {
        "method": "POST",
        "url": f"{server.base}/echo",
        "headers": {
            "X-Token": "abc",
            "Host": "evil.example",
            "Content-Length": "1",
            "Connection": "close",
            "Transfer-Encoding": "chunked",
        },
        "body": b"ping",
    }
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle("http", payload)
    echoed = json.loads(reply["body"])
    assert echoed["method"] == "POST"
    assert echoed["body"] == "ping"
    assert echoed["headers"]["x-token"] == "abc"
    # Host and framing headers are the client's, never the tool's.
    assert echoed["headers"]["host"] == f"127.0.0.1:{server.server_address[1]}"
    assert echoed["headers"]["content-length"] == "4"
    assert "transfer-encoding" not in echoed["headers"]


async def test_loopback_refused_unless_named(server: Server) -> None:
    async with make_gateway(FakeRules(), RecordingBackend()) as gw:
        with pytest.raises(EgressDenied) as info:
            await gw.handle("http", {"url": f"{server.base}/hello"})
    assert info.value.details["address_class"] == "loopback"
    assert info.value.rule == "egress.address"
    assert isinstance(info.value, PolicyDenied)
    assert server.log == []


@pytest.mark.parametrize(
    ("url", "klass"),
    [
        ("http://2130706433/", "loopback"),
        ("http://0x7f000001/", "loopback"),
        ("http://0x7f.1/", "loopback"),
        ("http://0177.0.0.1/", "loopback"),
        ("http://127.1/", "loopback"),
        ("http://[::ffff:127.0.0.1]/", "IPv4-mapped loopback"),
        ("http://[::ffff:7f00:1]/", "IPv4-mapped loopback"),
        ("http://[::1]/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://0xa9fea9fe/", "metadata"),
        ("http://0251.0376.0251.0376/", "metadata"),
        ("http://169.254.43518/", "metadata"),
        ("http://2852039166/", "metadata"),
        ("http://[::ffff:169.254.169.254]/", "IPv4-mapped metadata"),
        ("http://169.254.169.254./", "metadata"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://10.0.0.1/", "private"),
        ("http://172.16.5.4/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://[fc00::1]/", "private"),
        ("http://100.64.0.1/", "carrier-grade NAT"),
        ("http://169.254.1.1/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://224.0.0.1/", "multicast"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://0/", "unspecified"),
        ("http://[::]/", "unspecified"),
        ("http://240.0.0.1/", "reserved"),
        ("http://[2002:7f00:1::]/", "6to4 loopback"),
        ("http://[64:ff9b::a9fe:a9fe]/", "NAT64 metadata"),
        ("http://[::127.0.0.1]/", "IPv4-compatible loopback"),
        (
            "http://\uff11\uff12\uff17\u3002\uff10\u3002\uff10\u3002\uff11/",
            "loopback",
        ),  # full-width
    ],
)
async def test_encoded_internal_addresses_refused(url: str, klass: str) -> None:
    canned = CannedBackend()
    async with make_gateway(FakeRules(), canned, FakeResolver()) as gw:
        with pytest.raises(EgressDenied) as info:
            await gw.handle("http", {"url": url})
    assert info.value.details["address_class"] == klass
    assert canned.dialled == []


async def test_name_resolving_to_loopback_refused() -> None:
    resolver = FakeResolver({"innocent.example": [["127.0.0.1"]]})
    canned = CannedBackend()
    async with make_gateway(FakeRules(), canned, resolver) as gw:
        with pytest.raises(EgressDenied, match="loopback"):
            await gw.handle("http", {"url": "http://innocent.example/"})
    assert canned.dialled == []


async def test_localhost_refused_by_real_resolver(server: Server) -> None:
    async with EgressGateway(FakeRules()) as gw:
        with pytest.raises(EgressDenied, match="loopback"):
            await gw.handle("http", {"url": f"http://localhost:{server.server_address[1]}/"})
    assert server.log == []


async def test_any_bad_address_in_answer_refuses() -> None:
    resolver = FakeResolver({"mixed.example": [["93.184.216.34", "10.1.2.3"]]})
    canned = CannedBackend()
    async with make_gateway(FakeRules(), canned, resolver) as gw:
        with pytest.raises(EgressDenied, match="private"):
            await gw.handle("http", {"url": "http://mixed.example/"})
    assert canned.dialled == []


async def test_rebinding_dials_the_checked_address() -> None:
    # First answer public (checked), any later lookup would say loopback: no later lookup.
    resolver = FakeResolver({"rebind.example": [["93.184.216.34"], ["127.0.0.1"]]})
    canned = CannedBackend()
    async with make_gateway(FakeRules(), canned, resolver) as gw:
        reply = await gw.handle("http", {"url": "http://rebind.example:8080/x"})
    assert reply["body"] == b"canned"
    assert resolver.calls == ["rebind.example"]
    assert canned.dialled == [("93.184.216.34", 8080)]
    assert b"Host: rebind.example:8080\r\n" in canned.streams[0].written


async def test_tls_uses_the_name_for_sni() -> None:
    canned = CannedBackend()
    async with make_gateway(FakeRules(), canned, FakeResolver()) as gw:
        await gw.handle("http", {"url": "https://secure.example/"})
    assert canned.dialled == [("93.184.216.34", 443)]
    assert canned.streams[0].tls_server_hostname == "secure.example"


async def test_redirect_to_loopback_refused(internal: Server) -> None:
    canned = CannedBackend({"93.184.216.34": redirect_response(f"{internal.base}/hello")})
    async with make_gateway(FakeRules(), canned, FakeResolver()) as gw:
        with pytest.raises(EgressDenied, match="loopback"):
            await gw.handle("http", {"url": "http://public.example/"})
    assert internal.log == []


async def test_redirect_to_loopback_name_refused(internal: Server) -> None:
    resolver = FakeResolver({"internal.example": [["127.0.0.1"]]})
    location = f"http://internal.example:{internal.server_address[1]}/hello"
    canned = CannedBackend({"93.184.216.34": redirect_response(location, 307)})
    async with make_gateway(FakeRules(), canned, resolver) as gw:
        with pytest.raises(EgressDenied, match="redirect"):
            await gw.handle("http", {"url": "http://public.example/"})
    assert internal.log == []


@pytest.mark.parametrize(
    "location",
    [
        "file:///etc/passwd",
        "gopher://127.0.0.1:70/_x",
        "dict://x:11211/",
        "ftp://x/",
        "data:text/plain,hi",
        "http://user@x.example/",
        "\\\\evil.example/",
    ],
)
async def test_redirect_to_other_scheme_refused(location: str) -> None:
    canned = CannedBackend({"93.184.216.34": redirect_response(location)})
    async with make_gateway(FakeRules(), canned, FakeResolver()) as gw:
        with pytest.raises(EgressDenied):
            await gw.handle("http", {"url": "http://public.example/"})
    assert len(canned.dialled) == 1


async def test_redirect_followed_and_rechecked(server: Server) -> None:
    rules = local_rules()
    url = f"{server.base}/redirect?to=/hello"
    async with make_gateway(rules, RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": url})
    assert reply["status"] == 200
    assert reply["body"] == b"hello"
    assert reply["redirects"] == [f"{server.base}/hello"]
    assert len(rules.seen) == 2  # every hop asked the policy


async def test_redirect_to_named_loopback_allowed(server: Server, internal: Server) -> None:
    url = f"{server.base}/redirect?to={internal.base}/hello"
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": url})
    assert reply["headers"]["x-server"] == "internal"


async def test_redirect_not_followed_when_asked(server: Server) -> None:
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle(
            "http", {"url": f"{server.base}/redirect?to=/hello", "follow_redirects": False}
        )
    assert reply["status"] == 302
    assert reply["headers"]["location"] == "/hello"


async def test_redirect_limit(server: Server) -> None:
    loop = f"{server.base}/redirect?to=/redirect%3Fto%3D/hello"
    async with make_gateway(local_rules(max_redirects=1), RecordingBackend()) as gw:
        with pytest.raises(ToolFailed, match="redirects"):
            await gw.handle("http", {"url": loop})


async def test_redirect_303_turns_post_into_get_and_drops_body(server: Server) -> None:
    url = f"{server.base}/redirect?code=303&to=/echo"
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": url, "method": "POST", "body": b"secret"})
    echoed = json.loads(reply["body"])
    assert echoed["method"] == "GET"
    assert echoed["body"] == ""


async def test_cross_origin_redirect_drops_credentials(server: Server, internal: Server) -> None:
    url = f"{server.base}/redirect?to={internal.base}/echo"
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle(
            "http",
            {"url": url, "headers": {"Authorization": "Bearer t", "X-Keep": "1", "Accept": "a/b"}},
        )
    headers = json.loads(reply["body"])["headers"]
    assert "authorization" not in headers
    # Only the allowlisted headers follow to another origin (a custom one may be a secret).
    assert "x-keep" not in headers
    assert headers["accept"] == "a/b"


SECRET_HEADERS = {
    "Authorization": "Bearer t",
    "Cookie": "sid=1",
    "X-Api-Key": "k",
    "Private-Token": "p",
    "X-Amz-Security-Token": "s",
    "X-Auth-Token": "a",
    "apiKey": "c",
}


@pytest.mark.parametrize("code", [307, 302])
async def test_cross_origin_redirect_drops_every_secret_header(
    server: Server, internal: Server, code: int
) -> None:
    """Only Authorization and Cookie were dropped: X-Api-Key, Private-Token,
    X-Amz-Security-Token ... reached the other origin. Now every header the audit
    redactor calls secret, and those the caller marks with ``secret_headers``."""
    url = f"{server.base}/redirect?code={code}&to={internal.base}/echo"
    headers = {**SECRET_HEADERS, "X-Tenant": "acme", "Accept-Language": "fr", "Accept": "a/b"}
    payload = {"url": url, "headers": headers, "secret_headers": ["Accept-Language"]}
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle("http", payload)
    assert reply["status"] == 200
    sent = json.loads(reply["body"])["headers"]
    assert {k.lower() for k in SECRET_HEADERS} & set(sent) == set()
    # X-Tenant: not on the allowlist; Accept-Language: on it, but the caller marked it.
    assert "x-tenant" not in sent and "accept-language" not in sent
    assert sent["accept"] == "a/b"
    assert server.log[0]["headers"]["X-Api-Key"] == "k"  # the first origin had them


# Credentials under names no list of credential words holds (finding L3: "Authentication"
# and "X-Sig" reached the second origin), next to the headers that do follow.
UNLISTED_SECRETS = {"Authentication": "SEKRET5", "X-Sig": "SEKRET12", "X-Tenant": "acme"}
FOLLOWING = {
    "Accept": "application/json",
    "Accept-Encoding": "identity",
    "Accept-Language": "fr",
    "Cache-Control": "no-cache",
    "User-Agent": "agent/1",
    "If-None-Match": '"e1"',
    "If-Modified-Since": "Sat, 01 Jan 2000 00:00:00 GMT",
}


@pytest.mark.parametrize(
    ("code", "resent"), [(307, True), (308, True), (302, False), (303, False), (301, False)]
)
async def test_cross_origin_redirect_forwards_only_the_allowlist(
    server: Server, internal: Server, code: int, resent: bool
) -> None:
    """Finding L3: every header but a list of credential names followed a redirect to another
    origin, so ``Authentication: SEKRET5`` and ``X-Sig: SEKRET12`` reached it. Now only the
    allowlist follows; the body's Content-Type only while the body is resent (307, 308)."""
    url = f"{server.base}/redirect?code={code}&to={internal.base}/echo"
    headers = {**UNLISTED_SECRETS, **FOLLOWING, "Content-Type": "text/plain"}
    payload = {"url": url, "method": "POST", "headers": headers, "body": "data"}
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle("http", payload)
    echoed = json.loads(reply["body"])
    sent = echoed["headers"]
    assert {k.lower() for k in UNLISTED_SECRETS} & set(sent) == set()
    assert {k.lower(): v for k, v in FOLLOWING.items()}.items() <= sent.items()
    assert echoed["body"] == ("data" if resent else "")
    assert ("content-type" in sent) is resent
    assert server.log[0]["headers"]["Authentication"] == "SEKRET5"  # same origin: all of them


@pytest.mark.parametrize("via", ["host", "port"])
async def test_a_header_dropped_at_an_origin_change_stays_dropped(
    server: Server, internal: Server, via: str
) -> None:
    """Dropped on leaving the origin (to another host name, or another port), not given
    back on the way back to it."""
    back = f"{server.base}/echo"
    other = f"http://localhost:{server.server_address[1]}" if via == "host" else internal.base
    hop = f"{other}/redirect?code=307&to={quote(back, safe='')}"
    url = f"{server.base}/redirect?code=307&to={quote(hop, safe='')}"
    rules = FakeRules(named={"127.0.0.1", "localhost"})
    resolver = FakeResolver({"localhost": [["127.0.0.1"]]})
    async with make_gateway(rules, RecordingBackend(), resolver) as gw:
        reply = await gw.handle("http", {"url": url, "headers": UNLISTED_SECRETS})
    assert reply["url"] == back
    sent = json.loads(reply["body"])["headers"]
    assert {k.lower() for k in UNLISTED_SECRETS} & set(sent) == set()


async def test_same_origin_redirect_keeps_the_headers(server: Server) -> None:
    url = f"{server.base}/redirect?code=307&to=/echo"
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": url, "headers": SECRET_HEADERS})
    sent = json.loads(reply["body"])["headers"]
    assert {k.lower(): v for k, v in SECRET_HEADERS.items()} == {
        k: v for k, v in sent.items() if k in {n.lower() for n in SECRET_HEADERS}
    }


@pytest.mark.parametrize("bad", ["x-a", ["x-a", 1], ["h"] * 101, {"x": 1}])
async def test_secret_headers_must_be_a_list_of_names(server: Server, bad: object) -> None:
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        with pytest.raises(InvalidArguments, match="secret_headers"):
            await gw.handle("http", {"url": f"{server.base}/hello", "secret_headers": bad})
    assert server.log == []


async def test_oversized_body_truncated(server: Server) -> None:
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": f"{server.base}/big?n=500000", "max_bytes": 1000})
    assert reply["truncated"] is True
    assert reply["body"] == b"x" * 1000


async def test_policy_caps_max_bytes(server: Server) -> None:
    rules = local_rules(max_response_bytes=100)
    async with make_gateway(rules, RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": f"{server.base}/big?n=5000", "max_bytes": 10**9})
    assert len(reply["body"]) == 100
    assert reply["truncated"] is True


async def test_exact_size_not_truncated(server: Server) -> None:
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": f"{server.base}/big?n=1000", "max_bytes": 1000})
    assert reply["truncated"] is False
    assert len(reply["body"]) == 1000


async def test_gzip_bomb_capped(server: Server) -> None:
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": f"{server.base}/gzip?n=5000000", "max_bytes": 4096})
    assert reply["body"] == b"\0" * 4096
    assert reply["truncated"] is True
    assert "content-encoding" not in reply["headers"]


async def test_gzip_decoded(server: Server) -> None:
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": f"{server.base}/gzip?n=10"})
    assert reply["body"] == b"\0" * 10
    assert reply["truncated"] is False
    assert gzip.compress(b"") != reply["body"]


async def test_slow_server_times_out(server: Server) -> None:
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        with pytest.raises(ToolTimeout):
            await gw.handle("http", {"url": f"{server.base}/slow", "timeout_s": 0.3})


async def test_policy_caps_timeout(server: Server) -> None:
    async with make_gateway(local_rules(timeout_s=0.3), RecordingBackend()) as gw:
        with pytest.raises(ToolTimeout):
            await gw.handle("http", {"url": f"{server.base}/slow", "timeout_s": 60})


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "gopher://127.0.0.1:70/",
        "dict://127.0.0.1:11211/stat",
        "ftp://example.org/",
        "data:text/plain,hello",
        "javascript:alert(1)",
        "ws://example.org/",
    ],
)
async def test_schemes_refused(url: str) -> None:
    canned = CannedBackend()
    async with make_gateway(FakeRules(), canned, FakeResolver()) as gw:
        with pytest.raises(EgressDenied) as info:
            await gw.handle("http", {"url": url})
    assert info.value.rule in ("egress.scheme", "egress.url")
    assert canned.dialled == []


async def test_policy_rule_named_in_denial() -> None:
    rules = FakeRules(allow_hosts={"allowed.com"})
    canned = CannedBackend()
    async with make_gateway(rules, canned, FakeResolver()) as gw:
        with pytest.raises(EgressDenied) as info:
            await gw.handle("http", {"url": "http://allowed.com.evil.com/"})
        assert info.value.rule == "default"
        await gw.handle("http", {"url": "http://ALLOWED.com./"})
    assert rules.seen[-1] == ("http", "allowed.com", 80)


async def test_connect_error_is_tool_failed() -> None:
    # A port nothing listens on (bind then close to find one).
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        with pytest.raises(ToolFailed):
            await gw.handle("http", {"url": f"http://127.0.0.1:{port}/"})


async def test_retries_transient_status(server: Server) -> None:
    async with make_gateway(local_rules(retries=2), RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": f"{server.base}/flaky?fail=2"})
    assert reply["status"] == 200
    assert reply["body"] == b"recovered"
    assert server.flaky == 3


async def test_no_retries_without_policy(server: Server) -> None:
    async with make_gateway(local_rules(retries=0), RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": f"{server.base}/flaky?fail=1"})
    assert reply["status"] == 503
    assert server.flaky == 1


async def test_post_not_retried(server: Server) -> None:
    async with make_gateway(local_rules(retries=3), RecordingBackend()) as gw:
        reply = await gw.handle("http", {"url": f"{server.base}/flaky?fail=1", "method": "POST"})
    assert reply["status"] == 503
    assert server.flaky == 1


async def test_retry_rechecks_each_attempt() -> None:
    # The second attempt re-resolves; a rebinding answer on the retry is refused.
    resolver = FakeResolver({"flaky.example": [["93.184.216.34"], ["127.0.0.1"]]})
    busy = b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n"
    canned = CannedBackend({"93.184.216.34": busy})
    async with make_gateway(FakeRules(retries=1), canned, resolver) as gw:
        with pytest.raises(EgressDenied, match="loopback"):
            await gw.handle("http", {"url": "http://flaky.example/"})
    assert canned.dialled == [("93.184.216.34", 80)]


@pytest.mark.parametrize(
    "payload",
    [
        {"url": 5},
        {"url": "http://x.example/", "method": "TRACE"},
        {"url": "http://x.example/", "headers": {"X-A": "a\r\nInjected: 1"}},
        {"url": "http://x.example/", "headers": {"Bad Name": "1"}},
        {"url": "http://x.example/", "max_bytes": -1},
        {"url": "http://x.example/", "timeout_s": 0},
        {"url": "http://x.example/", "body": 12},
        {"url": "http://x.example/", "follow_redirects": "yes"},
    ],
)
async def test_bad_payload(payload: dict[str, object]) -> None:
    async with make_gateway(FakeRules(), CannedBackend(), FakeResolver()) as gw:
        with pytest.raises(InvalidArguments):
            await gw.handle("http", payload)


async def test_unknown_op_and_search_endpoint() -> None:
    rules = FakeRules(search_endpoint="http://127.0.0.1:1/search")
    async with make_gateway(rules, CannedBackend()) as gw:
        assert await gw.handle("search_endpoint", {}) == {"url": "http://127.0.0.1:1/search"}
        with pytest.raises(InvalidArguments):
            await gw.handle("exec", {})


async def test_connect_errors_retried_then_failed() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rec = RecordingBackend()
    async with make_gateway(local_rules(retries=2), rec) as gw:
        with pytest.raises(ToolFailed):
            await gw.handle("http", {"url": f"http://127.0.0.1:{port}/"})
    assert rec.dialled == [("127.0.0.1", port)] * 3


async def test_proxy_environment_ignored(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy would make the proxy, not the checked address, the thing dialled.
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    async with EgressGateway(local_rules()) as gw:
        reply = await gw.handle("http", {"url": f"{server.base}/hello"})
    assert reply["body"] == b"hello"


async def test_second_address_tried_after_connect_error(server: Server) -> None:
    # Both answers are checked; nothing listens on 127.0.0.3 (the server is bound to
    # 127.0.0.1), so the first dial is refused and the second serves.
    resolver = FakeResolver({"multi.example": [["127.0.0.3", "127.0.0.1"]]})
    rec = RecordingBackend()
    rules = FakeRules(named={"multi.example"})
    async with make_gateway(rules, rec, resolver) as gw:
        reply = await gw.handle(
            "http", {"url": f"http://multi.example:{server.server_address[1]}/hello"}
        )
    assert reply["body"] == b"hello"
    assert [ip for ip, _ in rec.dialled] == ["127.0.0.3", "127.0.0.1"]


async def test_deadline_mid_body(server: Server) -> None:
    async with make_gateway(local_rules(), RecordingBackend()) as gw:
        with pytest.raises(ToolTimeout):
            await gw.handle("http", {"url": f"{server.base}/stall", "timeout_s": 0.3})


# An error quoted a header's whole name: a 300,000-character bad name made a
# 300,000-character message. It is quoted cut to its first 64 characters, its length said.
@pytest.mark.parametrize(
    ("headers", "start"),
    [
        ({"H" * 300_000 + " ": "1"}, "bad header name 'HHH"),
        ({"H" * 300_000: "\x01"}, "value of header 'HHH"),
    ],
)
async def test_a_long_header_name_is_quoted_cut(headers: dict[str, str], start: str) -> None:
    async with make_gateway(FakeRules(), CannedBackend(), FakeResolver()) as gw:
        with pytest.raises(InvalidArguments) as info:
            await gw.handle("http", {"url": "http://x.example/", "headers": headers})
    message = info.value.message
    assert message.startswith(start) and "… (30000" in message and len(message) < 200
