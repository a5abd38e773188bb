"""What the CLI prints, and the audit tail/export lines, escape every character a terminal
acts on or that hides or reorders text, and still decode to the same data.

Before: ``runtime audit tail``/``export`` and ``runtime exec``'s JSON went through
``json.dumps(ensure_ascii=False)``, which escapes only C0: a call's argument holding U+009B
(CSI, the 8-bit ``ESC[``) cleared the screen of whoever tailed the log, and U+202E showed
``txt.exe`` for ``exe.txt``. And ``runtime exec`` at a terminal printed a custom wasm guest's
error message raw (``ESC[2J``, an ``ESC]8`` hyperlink to anywhere). Now one writer
(``runtime._jsontext``) escapes them all as ``\\uXXXX``, and the human error line shows
control and format characters as escapes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from runtime._jsontext import json_line, json_text, visible
from tests._pythonpath import python_path
from tests._wasm_tools import constant_guest_tool
from tests.cli.test_cli import ROOT, run
from tests.cli.test_cli_tty import _ON_THE_TERMINAL, _read_until

#: CSI twice (C1), a bidi override and its pop, an isolate, a zero width, a BOM, NEL, a line
#: separator, a tag character (astral), DEL, and ESC (C0, which json.dumps escapes itself).
HOSTILE = (
    "\u009b2J\u009b31mFAKE OK\u009b0m \u202etxt.exe\u202c \u2066x\u2069 a\u200bb \ufeff"
    "\u0085\u2028\U000e0041\x7f \x1b[2J"
)
RAW = [ch.encode() for ch in "\u009b\u202e\u202c\u2066\u2069\u200b\ufeff\u0085\u2028\x7f\x1b"]
RAW.append("\U000e0041".encode())


def _no_raw(data: bytes) -> None:
    for raw in RAW:
        assert raw not in data, (raw, data[:300])


@pytest.mark.parametrize("indent", [None, 2])
def test_the_writer_escapes_them_and_the_data_is_the_same(indent: int | None) -> None:
    obj: dict[str, Any] = {"text": HOSTILE, HOSTILE: [HOSTILE, 1, None], "plain": "é ü 中 😀"}
    text = json_text(obj, indent=indent)
    _no_raw(text.encode())
    assert "é ü 中 😀" in text  # readable text stays readable
    assert json.loads(text) == obj
    line = json_line(obj)
    assert line.endswith("\n") and line.count("\n") == 1
    assert len(line[:-1].splitlines()) == 1
    assert json.loads(line) == obj


def test_every_format_character_is_escaped() -> None:
    # the writer's table against this interpreter's Unicode database (category Cf)
    missed = [
        f"U+{code:04X}"
        for code in range(0x110000)
        if unicodedata.category(chr(code)) == "Cf" and chr(code) in json_text(chr(code))
    ]
    assert missed == []


def test_visible_shows_controls_as_escapes() -> None:
    said = visible("a\x1b[2J\x1b]8;;http://evil\x07click\u009b\u202e\nb\té\U000e0041")
    assert said == (
        "a\\u001b[2J\\u001b]8;;http://evil\\u0007click\\u009b\\u202e\\nb\\té\\U000e0041"
    )


@pytest.mark.parametrize(
    "blank",
    [
        "\u3164",  # HANGUL FILLER (Lo): a letter that draws nothing
        "\uffa0",
        "\u115f",
        "\u1160",
        "\u2800",  # BRAILLE PATTERN BLANK (So)
        "\u034f",  # COMBINING GRAPHEME JOINER (Mn, default ignorable)
        "\ufe0f",
        "\U000e0100",
        "\u17b4",
        "\u180b",
    ],
)
def test_visible_shows_blank_rendering_characters_as_escapes(blank: str) -> None:
    """Default-ignorable and blank-rendering characters are not Cf: terminal_char passed
    them, and a name or command hid text behind them."""
    code = ord(blank)
    assert visible(f"a{blank}b") == (f"a\\u{code:04x}b" if code <= 0xFFFF else f"a\\U{code:08x}b")


def test_default_ignorable_code_points_are_all_escaped() -> None:
    # Unicode 15's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt), which
    # the unicodedata module does not expose.
    ranges = [
        (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
        (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
        (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
        (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
        (0xE0000, 0xE0FFF),
    ]  # fmt: skip
    missed = [
        f"U+{code:04X}"
        for low, high in ranges
        for code in range(low, high + 1)
        if chr(code) in visible(chr(code))
    ]
    assert missed == []
    assert visible("héllo ✓ 日本") == "héllo ✓ 日本"


def _exec_hostile(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    call = json.dumps({"tool": "hash", "arguments": {"text": HOSTILE}})
    return run("exec", "-", "--json", "--workspace", "ws", cwd=tmp_path, stdin=call)


def _raw_run(tmp_path: Path, *args: str) -> bytes:
    proc = subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        cwd=tmp_path,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": python_path(ROOT)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.wasm
def test_audit_tail_and_export_escape_what_a_call_brought(tmp_path: Path) -> None:
    assert _exec_hostile(tmp_path).returncode == 0
    tail = _raw_run(tmp_path, "audit", "tail", "-n", "2", "--workspace", "ws")
    export = _raw_run(tmp_path, "audit", "export", "--workspace", "ws")
    for out in (tail, export):
        _no_raw(out)
        records = [json.loads(line) for line in out.decode().splitlines()]
        assert len(records) == 2  # one record a line
        assert records[0]["arguments"] == {"text": HOSTILE}  # the same data back


@pytest.mark.wasm
def test_exec_json_escapes_them_too(tmp_path: Path) -> None:
    call = json.dumps({"tool": "json_parse", "arguments": {"text": json.dumps(HOSTILE)}})
    proc = subprocess.run(
        [sys.executable, "-m", "runtime", "exec", "-", "--json", "--workspace", "ws"],
        cwd=tmp_path,
        input=call.encode(),
        capture_output=True,
        env={**os.environ, "PYTHONPATH": python_path(ROOT)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    _no_raw(proc.stdout)
    assert json.loads(proc.stdout)["result"] == {"data": HOSTILE}


def _guest_failing_with(folder: Path, message: bytes) -> Path:
    """A custom wasm tool ``c_errmsg`` whose every call fails with ``message``."""
    return constant_guest_tool(
        folder, "c_errmsg", b"\x01" + message, "Fails with a hostile message."
    )


def _at_a_terminal(tmp_path: Path, *argv: str) -> tuple[int, bytes]:
    main, term = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _ON_THE_TERMINAL, "-m", "runtime", *argv],
            stdin=term,
            stdout=term,
            stderr=term,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": python_path(ROOT)},
        )
    finally:
        os.close(term)
    try:
        out = _read_until(main, b"\x00", time.monotonic() + 90)  # to the end
    finally:
        code = proc.wait(timeout=60)
        os.close(main)
    return code, out


@pytest.mark.wasm
def test_exec_at_a_terminal_shows_a_guest_error_message_escaped(tmp_path: Path) -> None:
    tools = _guest_failing_with(
        tmp_path / "tools", b"\x1b[2J\x1b]8;;http://evil\x07click\x1b]8;;\x07 \xc2\x9b31m"
    )
    (tmp_path / "call.json").write_text('{"tool": "c_errmsg", "arguments": {}}')
    code, out = _at_a_terminal(
        tmp_path, "exec", "call.json", "--workspace", "ws", "--tools-dir", str(tools)
    )
    assert code == 1, out
    _no_raw(out)
    assert b"\x07" not in out
    assert b"c_errmsg: tool_error: \\u001b[2J\\u001b]8;;http://evil\\u0007click" in out
    assert b"\\u009b31m" in out


@pytest.mark.wasm
def test_exec_at_a_terminal_shows_a_result_escaped(tmp_path: Path) -> None:
    call = {"tool": "json_parse", "arguments": {"text": json.dumps(HOSTILE)}}
    (tmp_path / "call.json").write_text(json.dumps(call))
    code, out = _at_a_terminal(tmp_path, "exec", "call.json", "--workspace", "ws")
    assert code == 0, out
    _no_raw(out)
    assert b"\\u009b2J" in out and b"\\u202etxt.exe" in out
