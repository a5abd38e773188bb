"""runtime.toolkit.json_size / json_head: what the output cap measures, exactly."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from runtime.toolkit import json_head, json_size

# Control characters, the two-character escapes, ASCII, multi-byte and astral characters.
_TEXT = st.text(
    st.sampled_from(
        [
            "\x00",
            "\x01",
            "\x1f",
            "\x7f",
            '"',
            "\\",
            "\n",
            "\t",
            "\r",
            "\b",
            "\f",
            "a",
            " ",
            "é",
            "€",
            "\u2028",
            "\U0001f600",
        ]
    )
)


def _reference(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


@given(st.one_of(_TEXT, st.text()))
def test_json_size_is_the_size_of_the_json_string(text: str) -> None:
    assert json_size(text) == _reference(text)


@given(_TEXT, st.integers(min_value=0, max_value=200))
def test_json_head_is_the_longest_prefix_that_fits(text: str, size: int) -> None:
    head = json_head(text, size)
    assert text.startswith(head)
    assert _reference(head) <= size
    if head != text:
        assert _reference(text[: len(head) + 1]) > size
