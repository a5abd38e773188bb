"""Runs the atheris harness's invariants (benchmarks/fuzz/fuzz_url_check.py) under hypothesis."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

_HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz" / "fuzz_url_check.py"


def _load() -> Callable[[str], None]:
    spec = importlib.util.spec_from_file_location("_fuzz_url_check", _HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.check_url  # type: ignore[no-any-return]


check_url = _load()

_url_chars = st.sampled_from(
    [*"htps:/\\@[]#?%.0123456789abcfxX-_ \t\r\n", "\u3002", "\uff11", "\u00e9", "\u0430"]
)
_urls = st.one_of(
    st.text(_url_chars, max_size=40).map(lambda s: "http://" + s),
    st.text(_url_chars, max_size=40),
    st.text(max_size=40).map(lambda s: "https://" + s),
)


@settings(max_examples=500, deadline=None)
@given(_urls)
def test_url_invariants(url: str) -> None:
    check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",
        "http://[::ffff:127.0.0.1]:8080/a?b#c",
        "HTTP://Ex.COM./",
        "http://b\u00fccher.de/",
        "http://127.0.0.1:6666\\@1.1.1.1",
        "http://a.com/\u00e9",
    ],
)
def test_url_invariants_examples(url: str) -> None:
    check_url(url)
