"""Every lower-layer error becomes a runtime error; the public surface is small and sorted."""

from __future__ import annotations

import inspect

import httpcore
import httpx
import pytest
from egress_support import FakeResolver, FakeRules

import runtime.egress
from runtime.egress import EgressGateway
from runtime.egress._transport import _EXCEPTIONS
from runtime.errors import InvalidArguments, ToolFailed, ToolTimeout


def test_exports_sorted_and_present() -> None:
    names = runtime.egress.__all__
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions, each alphabetical.
    assert names == sorted(
        names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)
    )
    for name in names:
        assert hasattr(runtime.egress, name), name
    public = {n for n in vars(runtime.egress) if not n.startswith("_")} - {"annotations"}
    assert public <= set(names) | {
        "_addresses",
        "_decode",
        "_gateway",
        "_transport",
        "_types",
        "_url",
    }


def test_every_httpcore_exception_is_mapped() -> None:
    mapped = {core for core, _ in _EXCEPTIONS}
    for name in dir(httpcore):
        obj = getattr(httpcore, name)
        if (
            inspect.isclass(obj)
            and issubclass(obj, Exception)
            and obj.__module__.startswith("httpcore")
        ):
            assert obj in mapped, name


def _raising(exc: Exception) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return httpx.MockTransport(handler)


_REQ = httpx.Request("GET", "http://x.example/")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (httpx.ConnectError("refused", request=_REQ), ToolFailed),
        (httpx.ReadError("reset", request=_REQ), ToolFailed),
        (httpx.WriteError("broken", request=_REQ), ToolFailed),
        (httpx.RemoteProtocolError("garbage", request=_REQ), ToolFailed),
        (httpx.LocalProtocolError("bad", request=_REQ), ToolFailed),
        (httpx.UnsupportedProtocol("h3", request=_REQ), ToolFailed),
        (httpx.ConnectTimeout("slow", request=_REQ), ToolTimeout),
        (httpx.ReadTimeout("slow", request=_REQ), ToolTimeout),
        (httpx.WriteTimeout("slow", request=_REQ), ToolTimeout),
        (httpx.PoolTimeout("slow", request=_REQ), ToolTimeout),
        (ConnectionResetError(104, "reset"), ToolFailed),
    ],
)
async def test_transport_errors_translated(exc: Exception, expected: type[Exception]) -> None:
    gw = EgressGateway(
        FakeRules(), resolver=FakeResolver(), transport_factory=lambda: _raising(exc)
    )
    async with gw:
        with pytest.raises(expected) as info:
            await gw.handle("http", {"url": "http://x.example/"})
    assert info.value.__cause__ is exc


@pytest.mark.anyio
# "v\n": a regex ending in '$' also matched before a trailing newline.
@pytest.mark.parametrize("value", ["caf\u00e9", "a\x01b", "a\x7fb", "a\nb", "v\n", "v\r\n"])
async def test_header_values_must_be_printable_ascii(value: str) -> None:
    gw = EgressGateway(
        FakeRules(),
        resolver=FakeResolver(),
        transport_factory=lambda: _raising(AssertionError("never sent")),
    )
    async with gw:
        with pytest.raises(InvalidArguments):
            await gw.handle("http", {"url": "http://x.example/", "headers": {"X-A": value}})


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["X-A\n", "X A", "", "X-\u00e9", "X-A\r\n"])
async def test_header_names_must_be_tokens(name: str) -> None:
    gw = EgressGateway(
        FakeRules(),
        resolver=FakeResolver(),
        transport_factory=lambda: _raising(AssertionError("never sent")),
    )
    async with gw:
        with pytest.raises(InvalidArguments, match="bad header name"):
            await gw.handle("http", {"url": "http://x.example/", "headers": {name: "v"}})


@pytest.mark.anyio
async def test_unresolvable_name_is_tool_failed() -> None:
    async with EgressGateway(FakeRules()) as gw:
        with pytest.raises(ToolFailed, match="resolve"):
            await gw.handle("http", {"url": "http://does-not-exist.invalid/"})


@pytest.mark.anyio
async def test_transport_without_pin_refuses() -> None:
    transport = runtime.egress.PinnedTransport()
    with pytest.raises(httpx.ConnectError, match="no checked address"):
        await transport.handle_async_request(httpx.Request("GET", "http://127.0.0.1:9/"))
