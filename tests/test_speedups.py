"""The C accelerator (runtime/_speedups.c): byte-identical to the Python walk and to rfc8785,
the same error types for bad values, and a loader that falls back instead of failing."""

from __future__ import annotations

import collections
import enum
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from runtime import _speedups
from runtime.audit import _canonical
from runtime.audit._canonical import (
    CanonicalizationError,
    canonical_json,
    canonical_json_ijson,
    canonical_json_ijson_bulk,
    canonical_scalar,
)
from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[1]


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Ratio(float):
    pass


class Items(list[Any]):
    pass


class Pairs(tuple[Any, ...]):
    pass


class Named(dict[str, Any]):
    pass


# Every kind of text: astral keys (UTF-16 order differs), controls, quotes, backslashes.
TEXT = st.text(st.characters(exclude_categories=("Cs",)))
CHARS = st.sampled_from(["a", "\x00", "\x1f", "\x7f", '"', "\\", "\u00e9", "\uff61", "\U0001f600"])
TRICKY_TEXT = TEXT | st.lists(CHARS, max_size=8).map("".join)
THRESHOLDS = st.sampled_from(
    [
        1e21,
        9.999999999999999e20,
        1e20,
        1e-6,
        9.99999999999e-7,
        1e-7,
        1e16,
        1e15,
        1.5e-5,
        5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        float(2**53),
        -0.0,
        0.1,
        100.0,
        123456789012345680000.0,
    ]
)
FLOATS = (
    st.floats(allow_nan=False, allow_infinity=False) | THRESHOLDS | THRESHOLDS.map(lambda x: -x)
)
SAFE_INT = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
ANY_INT = st.integers() | st.sampled_from(
    [2**53 - 1, 2**53, -(2**53) + 1, -(2**53), 2**64, -(2**70)]
)
SCALARS = st.none() | st.booleans() | ANY_INT | FLOATS | TRICKY_TEXT
SUBCLASSED = st.sampled_from([Colour.RED, Level.HIGH, Ratio(2.5), Ratio(1e22), Ratio(-0.0)])


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = TRICKY_TEXT | st.sampled_from([Colour.RED, "\U0001f600a", "\uff61", "\U00010000"])
    return (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=5).map(tuple)
        | st.lists(children, max_size=3).map(Items)
        | st.lists(children, max_size=3).map(Pairs)
        | st.dictionaries(keys, children, max_size=5)
        | st.dictionaries(keys, children, max_size=3).map(collections.OrderedDict)
        | st.dictionaries(keys, children, max_size=3).map(Named)
    )


JSON = st.recursive(SCALARS | SUBCLASSED, _containers, max_leaves=30)
BAD_LEAVES = st.sampled_from(
    [
        float("nan"),
        math.inf,
        -math.inf,
        {1, 2},
        b"bytes",
        "\ud800",
        "a\udfffb",
        {1: "x"},
        {None: 1},
        {"\udc00": 1},
        {("t",): 1},
        object(),
        2**64,
        Ratio("nan"),
    ]
)
MAYBE_BAD = st.recursive(SCALARS | SUBCLASSED | BAD_LEAVES, _containers, max_leaves=20)


def _outcome(fn: Callable[[Any, bool], bytes], value: Any, ijson: bool) -> tuple[str, Any]:
    try:
        return "ok", fn(value, ijson)
    except Exception as exc:  # the type is what is compared
        return "error", type(exc)


@given(JSON)
def test_c_equals_walk_and_rfc8785(c_mod: ModuleType, value: Any) -> None:
    for ijson in (False, True):
        c = _outcome(c_mod.canonical, value, ijson)
        py = _outcome(_canonical._py_encode, value, ijson)
        assert c == py
    try:
        reference = rfc8785.dumps(value)
    except CanonicalizationError:
        return  # big integers: refused by both, compared above
    assert c_mod.canonical(value, False) == reference


@given(MAYBE_BAD)
def test_bad_values_raise_the_same_error_type(c_mod: ModuleType, value: Any) -> None:
    for ijson in (False, True):
        assert _outcome(c_mod.canonical, value, ijson) == _outcome(
            _canonical._py_encode, value, ijson
        )


@given(FLOATS)
def test_floats_in_ecmascript_form(c_mod: ModuleType, value: float) -> None:
    assert c_mod.canonical(value, False) == rfc8785.dumps(value)
    assert c_mod.canonical_text(value, False) == _canonical._walk(value, False)


@given(st.dictionaries(TRICKY_TEXT, SAFE_INT, min_size=17, max_size=40))
def test_large_objects_sort_like_the_walk(c_mod: ModuleType, value: dict[str, Any]) -> None:
    # More than 16 members take the qsort path instead of the insertion sort.
    assert c_mod.canonical(value, False) == rfc8785.dumps(value)


def test_utf16_order_and_escapes(c_mod: ModuleType) -> None:
    value = {"\uff61": 1, "\U0001f600": 2, "a": 3, "\U0001f600\x00": '\b\f\n\r\t\x01\x1f\x7f"\\'}
    assert c_mod.canonical(value, False) == rfc8785.dumps(value)
    assert c_mod.canonical(value, False).decode() == (
        '{"a":3,"\U0001f600":2,"\U0001f600\\u0000":"\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\\"\\\\",'
        '"\uff61":1}'
    )


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (2**53, rfc8785.IntegerDomainError),
        (float("nan"), rfc8785.FloatDomainError),
        (-math.inf, rfc8785.FloatDomainError),
        ({1: "x"}, CanonicalizationError),
        ({"a": {1, 2}}, CanonicalizationError),
        (b"x", CanonicalizationError),
        ("\ud800", CanonicalizationError),
        ({"\ud800": 1}, CanonicalizationError),
        # The walk builds all the text before encoding it: a NaN after a lone surrogate
        # raises the NaN's error on both paths.
        (["\ud800", float("nan")], rfc8785.FloatDomainError),
        # The error's own constructor fails: str() of an int past the digit limit.
        pytest.param(10**5000, ValueError, id="huge-int"),
    ],
)
def test_errors(c_mod: ModuleType, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error) as c_info:
        c_mod.canonical(value, False)
    with pytest.raises(error) as py_info:
        _canonical._py_encode(value, False)
    assert type(c_info.value) is type(py_info.value)
    assert str(c_info.value) == str(py_info.value)


def test_huge_int_as_ijson_string_hits_the_same_digit_limit(c_mod: ModuleType) -> None:
    assert c_mod.canonical([10**300], True) == _canonical._py_encode([10**300], True)
    with pytest.raises(ValueError, match="limit"):
        c_mod.canonical([10**5000], True)
    with pytest.raises(ValueError, match="limit"):
        _canonical._py_encode([10**5000], True)


def _nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@pytest.mark.parametrize("depth", [10, 300, 1500, 100_000])
def test_deep_nesting_no_crash(c_mod: ModuleType, depth: int) -> None:
    # The accelerator takes one recursion level per container, the walk two: whatever the
    # walk accepts, the accelerator accepts with the same bytes; too deep is RecursionError.
    value = _nested(depth)
    outcomes = set()
    for fn in (canonical_json, canonical_json_ijson, canonical_json_ijson_bulk):
        try:
            outcomes.add(fn(value))
        except RecursionError:
            outcomes.add(RecursionError)
    assert len(outcomes) == 1
    try:
        pure: Any = _canonical._py_encode(value, False)
    except RecursionError:
        pure = RecursionError
    if pure is not RecursionError:
        assert outcomes == {pure}
    if depth == 100_000:
        assert outcomes == {RecursionError}


def test_raised_recursion_limit_past_the_c_depth_cap(c_mod: ModuleType) -> None:
    # 3000 levels: past the accelerator's fixed cap (1000), within what the walk reaches
    # under a raised limit; the C RecursionError hands over to the walk.
    value = _nested(3000)
    with pytest.raises(RecursionError):
        c_mod.canonical(value, False)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        assert canonical_json(value) == _canonical._py_encode(value, False)
    finally:
        sys.setrecursionlimit(old)


def test_mutating_container_during_walk_does_not_crash(c_mod: ModuleType) -> None:
    target: dict[str, Any] = {}

    class Sneaky(int):
        def __int__(self) -> int:
            target.clear()  # frees the values the walk is holding, were they borrowed
            return 7

    def fill() -> dict[str, Any]:
        target.update({"a": Sneaky(1), "b": "x" * 100, "c": [Sneaky(2), "y" * 100]})
        return target

    expected = b'{"a":7,"b":"' + b"x" * 100 + b'","c":[7,"' + b"y" * 100 + b'"]}'
    assert c_mod.canonical(fill(), False) == expected
    assert _canonical._py_encode(fill(), False) == expected


def test_scalar_and_bulk_use_the_same_bytes(c_mod: ModuleType) -> None:
    assert canonical_scalar(1e21) == "1e+21" == _canonical._walk(1e21, False)
    assert canonical_scalar(2.0) == "2"
    assert canonical_json_ijson_bulk({"n": 2**60, "f": 3.0}) == b'{"f":3,"n":"1152921504606846976"}'


def test_wrong_arguments(c_mod: ModuleType) -> None:
    with pytest.raises(TypeError):
        c_mod.canonical({})


# -- the loader --------------------------------------------------------------------------


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """module() decides again, and the process's decision is restored afterwards."""
    monkeypatch.setattr(
        _speedups, "_state", {"decided": False, "module": None, "error": None, "path": None}
    )
    yield


def test_missing_headers_fall_back(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="headers are not installed"):
        _speedups.build_and_load(tmp_path / "cache", include=tmp_path / "no-include")


def test_broken_compiler_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_state: None
) -> None:
    monkeypatch.delenv(_speedups.PURE_ENV, raising=False)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with pytest.raises(OSError, match="could not run the zig compiler"):
        _speedups.build_and_load(tmp_path / "cache")
    monkeypatch.setattr(_speedups, "_cache_root", lambda: tmp_path / "cache2")
    assert _speedups.module() is None
    status = _speedups.status()
    assert status["loaded"] is False
    assert "zig compiler" in status["error"]


def test_compiler_error_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built_once: Path
) -> None:
    bad = tmp_path / "bad.c"
    bad.write_text("this is not C\n")
    monkeypatch.setattr(_speedups, "_SOURCE", bad)
    # The cache of built_once: its zig cache makes this compile quick.
    with pytest.raises(OSError, match="zig cc exited"):
        _speedups.build_and_load(built_once.parents[1])


def test_forced_pure_switch(monkeypatch: pytest.MonkeyPatch, fresh_state: None) -> None:
    monkeypatch.setenv(_speedups.PURE_ENV, "1")
    assert _speedups.module() is None
    assert _speedups.status() == {"loaded": False, "error": f"disabled by {_speedups.PURE_ENV}"}


def test_forced_pure_switch_in_a_fresh_process() -> None:
    code = (
        "from runtime import _speedups\n"
        "from runtime.audit import canonical_json\n"
        "from runtime.audit import _canonical\n"
        "assert canonical_json({'b': 1e21, 'a': 2}) == b'{\"a\":2,\"b\":1e+21}'\n"
        "assert _canonical._encode is _canonical._py_encode\n"
        "print(_speedups.status())\n"
    )
    env = {**os.environ, _speedups.PURE_ENV: "1", "PYTHONPATH": python_path(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "disabled by RUNTIME_PURE_PYTHON" in proc.stdout


@pytest.mark.parametrize("pure", [False, True])
def test_doctor_says_whether_it_is_loaded(c_mod: ModuleType, tmp_path: Path, pure: bool) -> None:
    env = {**os.environ, "PYTHONPATH": python_path(ROOT), _speedups.PURE_ENV: "1" if pure else ""}
    proc = subprocess.run(
        [sys.executable, "-m", "runtime", "doctor"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["speedups"]
    if pure:
        assert report == {"loaded": False, "error": f"disabled by {_speedups.PURE_ENV}"}
    else:
        assert report == {"loaded": True, "error": None}


@pytest.fixture(scope="module")
def built_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("speedups")
    _speedups.build_and_load(cache)
    return next((cache / _speedups._digest()).glob("_rt_speedups*"))


@pytest.fixture
def _built(tmp_path: Path, built_once: Path) -> tuple[Path, Path]:
    """A cache under tmp_path holding a copy of the built file (one compile per module)."""
    out = tmp_path / "cache" / _speedups._digest()
    out.mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "cache", 0o700)
    built = out / built_once.name
    built.write_bytes(built_once.read_bytes())  # a new inode: dlopen loads it afresh
    os.chmod(built, 0o700)
    return out, built


def test_cache_builds_once_and_reloads(tmp_path: Path, _built: tuple[Path, Path]) -> None:
    _, built = _built
    assert built.name.endswith(str(_speedups._ext_suffix()))
    stamp = built.stat().st_mtime_ns
    mod = _speedups.build_and_load(tmp_path / "cache")
    assert built.stat().st_mtime_ns == stamp
    assert mod.canonical([1.5, "x"], False) == b'[1.5,"x"]'


def test_shared_writable_cache_is_not_loaded(tmp_path: Path, _built: tuple[Path, Path]) -> None:
    out, _ = _built
    os.chmod(out, 0o777)
    with pytest.raises(OSError, match="not a private directory"):
        _speedups.build_and_load(tmp_path / "cache")


def test_writable_file_is_not_loaded(tmp_path: Path, _built: tuple[Path, Path]) -> None:
    _, built = _built
    os.chmod(built, 0o775)
    with pytest.raises(OSError, match="not ours alone"):
        _speedups.build_and_load(tmp_path / "cache")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_file_of_another_owner_is_not_loaded(tmp_path: Path, _built: tuple[Path, Path]) -> None:
    _, built = _built
    os.chown(built, 65534, 65534)
    with pytest.raises(OSError, match="not ours alone"):
        _speedups.build_and_load(tmp_path / "cache")


def test_adopt_loads_exactly_the_named_file_whatever_the_environment(
    monkeypatch: pytest.MonkeyPatch, fresh_state: None, _built: tuple[Path, Path]
) -> None:
    """A process the broker starts takes the broker's file (``adopt``), even with PURE_ENV
    set (the fork-server's guard until its init) and a cache of its own elsewhere."""
    _, built = _built
    monkeypatch.setenv(_speedups.PURE_ENV, "1")
    monkeypatch.setattr(_speedups, "_cache_root", _no_own_cache)
    mod = _speedups.adopt(str(built))
    assert mod is not None and mod.canonical([1.5, "x"], False) == b'[1.5,"x"]'
    assert _speedups.module() is mod
    assert _speedups.loaded_path() == built
    assert _speedups.status() == {"loaded": True, "error": None}


def test_adopt_of_nothing_is_the_pure_path(
    monkeypatch: pytest.MonkeyPatch, fresh_state: None
) -> None:
    monkeypatch.delenv(_speedups.PURE_ENV, raising=False)
    monkeypatch.setattr(_speedups, "_cache_root", _no_own_cache)
    assert _speedups.adopt("") is None
    assert _speedups.module() is None and _speedups.loaded_path() is None
    assert _speedups.status()["error"] == "not loaded by the process that started this one"


def test_adopt_checks_the_file_as_a_build_does(
    monkeypatch: pytest.MonkeyPatch, fresh_state: None, _built: tuple[Path, Path]
) -> None:
    out, built = _built
    monkeypatch.setattr(_speedups, "_cache_root", _no_own_cache)
    os.chmod(out, 0o777)
    assert _speedups.adopt(str(built)) is None
    assert "not a private directory" in _speedups.status()["error"]
    assert _speedups.loaded_path() is None


def test_loaded_path_names_the_file_module_loaded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_state: None, _built: tuple[Path, Path]
) -> None:
    _, built = _built
    monkeypatch.delenv(_speedups.PURE_ENV, raising=False)
    monkeypatch.setattr(_speedups, "_cache_root", lambda: tmp_path / "cache")
    assert _speedups.loaded_path() == built
    assert _speedups.module() is not None


def test_loaded_path_is_the_real_path_of_what_was_loaded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_state: None, _built: tuple[Path, Path]
) -> None:
    """The cache as the user named it (``XDG_CACHE_HOME=.../sub/../cache``) may hold a
    ``..`` or a symlink whose meaning a later open would resolve again: the fork-server is
    sent the path of the file the broker loaded, with neither."""
    _, built = _built
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "sub")
    monkeypatch.delenv(_speedups.PURE_ENV, raising=False)
    monkeypatch.setattr(_speedups, "_cache_root", lambda: Path(f"{tmp_path}/link/../cache"))
    real = Path(os.path.realpath(built))
    assert _speedups.loaded_path() == real
    assert _speedups.module() is not None
    _speedups.adopt(f"{tmp_path}/link/../cache/{built.parent.name}/{built.name}")
    assert _speedups.loaded_path() == real


def _no_own_cache() -> Path:
    raise AssertionError("adopt looked for a cache of its own")


def test_symlinked_file_is_not_followed(tmp_path: Path, _built: tuple[Path, Path]) -> None:
    _, built = _built
    real = tmp_path / "elsewhere.so"
    built.rename(real)
    built.symlink_to(real)
    with pytest.raises(OSError):
        _speedups.build_and_load(tmp_path / "cache")


def test_wasm_native_helper_still_loads_after_it(c_mod: ModuleType, tmp_path: Path) -> None:
    # glibc's dlopen returns an already loaded object of the same name, and the wasm native
    # helper is loaded as /proc/self/fd/<n>, the lowest free fd, as this module was: under
    # that shared name the helper would get this module's code and fail its symbol lookup.
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from runtime import _speedups\n"
        "from runtime.backends.wasm._native import load_native\n"
        "mod = _speedups.module()\n"
        "assert mod is not None, _speedups.status()\n"
        "load_native(Path(sys.argv[1]))\n"
        "print(mod.__file__.startswith(f'/proc/{os.getpid()}/fd/'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": python_path(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True"]


def test_not_an_extension_is_an_import_error(tmp_path: Path, _built: tuple[Path, Path]) -> None:
    _, built = _built
    built.write_bytes(b"\x7fELF garbage")
    # In a fresh process: glibc's dlopen returns an object already loaded under the same
    # name, and every load here is named /proc/self/fd/<n>.
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from runtime import _speedups\n"
        "try:\n"
        "    _speedups.build_and_load(Path(sys.argv[1]))\n"
        "except ImportError as exc:\n"
        "    print('ImportError', exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "cache")],
        env={**os.environ, "PYTHONPATH": python_path(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ImportError"), proc.stdout


# ASCII text only (the C walk's two-pass escape), every character likely, long enough to
# outgrow the encoder's first buffer: runs without escapes, escapes back to back.
ASCII_TEXT = st.text(st.characters(max_codepoint=127), max_size=3000) | st.lists(
    st.sampled_from(["ab", '"', "\\", "\x00", "\n", "\x1f", "\x7f", "x" * 700]), max_size=40
).map("".join)


@given(st.dictionaries(ASCII_TEXT, ASCII_TEXT | st.lists(ASCII_TEXT, max_size=3), max_size=4))
def test_ascii_escapes_equal_the_walk(c_mod: ModuleType, value: dict[str, Any]) -> None:
    for ijson in (False, True):
        assert _outcome(c_mod.canonical, value, ijson) == _outcome(
            _canonical._py_encode, value, ijson
        )
    assert c_mod.canonical(value, False) == rfc8785.dumps(value)
