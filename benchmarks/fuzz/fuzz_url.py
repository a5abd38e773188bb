"""Atheris harness for the egress URL check (runtime/egress). Not run in CI.

    pip install atheris
    python benchmarks/fuzz/fuzz_url.py -max_total_time=600 corpus_url/

Differential property: a URL is refused by ``parse_target``, or the host and port it
approved are the ones httpx (the client) reads from the URL the gateway sends, and from the
original string wherever httpx can read it; an approved numeric host equals what the C
library's ``inet_aton`` makes of it.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports():
    import httpx

    from runtime.egress import EgressDenied, parse_ipv4_host, parse_target

_PORTS = {"http": 80, "https": 443}


def _same(t, host: str) -> bool:
    if t.address is not None:
        try:
            return ipaddress.ip_address(host.strip("[]")) == t.address
        except ValueError:
            try:
                return parse_ipv4_host(host) == t.address
            except ValueError:
                return False
    return host.rstrip(".").lower() == t.host


def test_one_input(data: bytes) -> None:
    url = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(512)
    try:
        t = parse_target(url)
    except EgressDenied:
        return
    sent = httpx.URL(t.url)
    if not _same(t, sent.raw_host.decode()) or (sent.port or _PORTS[sent.scheme]) != t.port:
        raise AssertionError(f"serialised URL differs: {url!r} -> {t} -> {sent}")
    try:
        orig = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        orig = None
    if (
        orig is not None
        and orig.scheme in _PORTS
        and orig.raw_host
        and (not _same(t, orig.raw_host.decode()) or (orig.port or _PORTS[orig.scheme]) != t.port)
    ):
        raise AssertionError(f"parser differential: {url!r}: checked {t}, client {orig}")
    if t.address is not None and t.address.version == 4:
        host = url.split("//", 1)[1].split("/", 1)[0].split(":", 1)[0]
        try:
            aton = socket.inet_aton(host)
        except OSError:
            return
        if aton != t.address.packed:
            raise AssertionError(f"inet_aton differs: {host!r}")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
