"""Coverage-guided fuzzing of the egress URL check (atheris; not run in CI).

    /work/venv/bin/pip install atheris
    /work/venv/bin/python benchmarks/fuzz/fuzz_url_check.py -max_total_time=600 corpus/

``check_url`` holds the invariants; tests/egress/test_egress_fuzz_harness.py runs the same function
under hypothesis in CI, so the invariants cannot rot while nobody runs the fuzzer.
"""

from __future__ import annotations

import sys
from urllib.parse import urlsplit


def check_url(url: str) -> None:
    """Either the parser refuses ``url``, or everything downstream agrees on its host."""
    import httpx

    from runtime.egress import EgressDenied, address_class, parse_ipv4_host, parse_target

    try:
        target = parse_target(url)
    except EgressDenied:
        return
    assert target.scheme in ("http", "https"), target
    assert 0 < target.port < 65536, target
    assert target.host and target.host == target.host.lower(), target
    assert not target.host.endswith("."), target
    canonical = target.url
    # No blank, control or backslash survives into what is sent.
    assert not any(c.isspace() or ord(c) < 0x20 or c == "\\" for c in canonical), canonical
    # Canonical form is a fixed point, and other parsers read the same host from it.
    assert parse_target(canonical) == target, (url, canonical)
    assert httpx.URL(canonical).raw_host.decode("ascii") == target.host, canonical
    assert (urlsplit(canonical).hostname or "") == target.host, canonical
    if target.address is None:
        # A name is never something inet_aton would read as an address.
        assert parse_ipv4_host(target.host) is None, target
    else:
        address_class(target.address)  # classifies every address without raising


def main() -> None:
    import atheris

    with atheris.instrument_imports():
        import runtime.egress._url  # noqa: F401

    def one_input(data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        # Most random strings die at the scheme check; start most inputs past it.
        prefix = fdp.PickValueInList(["http://", "https://", "HTTP://", ""])
        check_url(prefix + fdp.ConsumeUnicodeNoSurrogates(512))

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
