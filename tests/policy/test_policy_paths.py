from __future__ import annotations

import posixpath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.policy.paths import PathRules, allow_globs, normalise
from runtime.policy.schema import PathsSection

RULES = PathRules(
    PathsSection(
        deny=[".runtime/**", "**/.env", "**/*.pem", "**/id_rsa*"],
        deny_write=[".git/**"],
    )
)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/etc/passwd", "paths.absolute"),
        ("/workspace-evil/x", "paths.absolute"),
        ("//etc/passwd", "paths.absolute"),
        ("../x", "paths.escape"),
        ("a/../../x", "paths.escape"),
        ("/workspace/../etc", "paths.escape"),
        ("a\\..\\..\\x", "paths.escape"),
        ("a\x00b", "paths.invalid"),
        ("a\nb", "paths.invalid"),
        ("a\u202eb", "paths.invalid"),
        ("~/x", "paths.invalid"),
        (".env", "paths.deny"),
        ("sub/.env", "paths.deny"),
        ("\uff0eenv", "paths.deny"),  # fullwidth full stop, NFKC -> '.env'
        (".ENV", "paths.deny"),
        ("certs/server.pem", "paths.deny"),
        ("certs\\server.pem", "paths.deny"),
        (".ssh/id_rsa.pub", "paths.deny"),
        (".runtime/audit.db", "paths.deny"),
        (".runtime", "paths.deny"),
        ("./a/../.runtime/x", "paths.deny"),
        (5, "paths.invalid"),
    ],
)
def test_read_denied(path: object, rule: str) -> None:
    v = RULES.check(path, "read")
    assert not v.allowed
    assert v.rule == rule
    assert v.reason


@pytest.mark.parametrize(
    "path",
    [
        "a.txt",
        "src/main.py",
        "/workspace/src/x",
        "/workspace",
        ".",
        "",
        "dir with space/f",
        "%2e%2e%2f",
        "...foo",
        "caf\u00e9.txt",
        ".git/config",
        "a/./b/../c",
    ],
)
def test_read_allowed(path: str) -> None:
    assert RULES.check(path, "read").allowed


def test_write_rules() -> None:
    assert RULES.check("src/x.py", "write").allowed
    v = RULES.check(".git/hooks/pre-commit", "write")
    assert (v.allowed, v.rule) == (False, "paths.deny_write")
    assert RULES.check(".git", "write").rule == "paths.deny_write"
    assert RULES.check(".", "write").rule == "paths.root"
    assert RULES.check("", "write").rule == "paths.invalid"
    assert RULES.check(".", "read", role="cwd").allowed


def test_allow_globs_limit_access() -> None:
    rules = PathRules(PathsSection(read=["src/**"], write=["build/**"]))
    assert rules.check("src/a.py", "read").allowed
    assert rules.check("docs/a.md", "read").rule == "paths.read"
    assert rules.check("build/out", "write").allowed
    assert rules.check("src/a.py", "write").rule == "paths.write"


def test_normalise() -> None:
    assert normalise("/workspace/a/./b/../c") == "a/c"
    assert normalise("a//b/") == "a/b"
    with pytest.raises(ValueError, match="outside"):
        normalise("/tmp/x")


_segment = st.one_of(
    st.sampled_from(["..", ".", "", "a", "b", ".env", "\\..", "..\\", "workspace"]),
    st.text(alphabet="ab.\\/", min_size=1, max_size=4),
)


@given(st.lists(_segment, min_size=1, max_size=8), st.booleans())
@settings(max_examples=400, deadline=None)
def test_no_path_that_leaves_the_workspace_is_allowed(segs: list[str], absolute: bool) -> None:
    path = ("/workspace/" if absolute else "") + "/".join(segs)
    for access in ("read", "write"):
        v = RULES.check(path, access)  # type: ignore[arg-type]
        if not v.allowed:
            continue
        # Allowed: under every reading of the separators, the path stays inside.
        for form in (path, path.replace("\\", "/")):
            resolved = posixpath.normpath(posixpath.join("/workspace", form))
            resolved = "/" + resolved.lstrip("/")  # '//x' is '/x' on Linux
            assert resolved == "/workspace" or resolved.startswith("/workspace/"), path


_lookalikes = {
    ".": [".", "\uff0e"],
    "e": ["e", "E", "\uff45", "\uff25"],
    "n": ["n", "N", "\uff4e"],
    "v": ["v", "V", "\uff56"],
}


@given(
    st.lists(st.sampled_from(["", "a/", "./", "b/c/", "a/../"]), max_size=3),
    st.tuples(*[st.sampled_from(_lookalikes[c]) for c in ".env"]),
    st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_protected_names_cannot_be_dodged(
    prefix: list[str], name: tuple[str, ...], backslash: bool
) -> None:
    path = "".join(prefix) + "".join(name)
    if backslash:
        path = path.replace("/", "\\")
    v = RULES.check(path, "read")
    assert not v.allowed, path


def test_a_write_path_deeper_than_the_mask_walk_can_check_is_refused() -> None:
    """``write_file a/a/…/x`` (300 levels) made every directory, then failed, and every later
    call on the workspace failed at the sandbox's mask walk (nested deeper than 256). The
    path is refused here, before anything exists, with a reason that says why."""
    from runtime._depth import CREATE_MAX_DEPTH, WALK_MAX_DEPTH

    rules = PathRules(PathsSection())
    assert CREATE_MAX_DEPTH < WALK_MAX_DEPTH
    deep = "a/" * 300 + "x"
    verdict = rules.check(deep, "write")
    assert not verdict.allowed and verdict.rule == "paths.depth", verdict
    assert f"at most {CREATE_MAX_DEPTH}" in verdict.reason
    at_limit = "a/" * (CREATE_MAX_DEPTH - 1) + "x"
    assert rules.check(at_limit, "write").allowed
    assert not rules.check(at_limit + "/y", "write").allowed
    assert rules.check(deep, "read").allowed  # reading cannot create a tree


def test_allow_globs_for_the_toolkit_only_when_narrower_than_everything() -> None:
    # The default policy hands nothing to the toolkit: it behaves exactly as before.
    assert allow_globs(PathsSection()) == (None, None)
    assert allow_globs(PathsSection(read=["out/**"], write=["out/**", "out/**"])) == (
        ("out/**",),
        ("out/**",),
    )
    assert allow_globs(PathsSection(read=["src/**", "**"], write=["build/**"])) == (
        None,
        ("build/**",),
    )


# A denial quoted the whole path: a custom tool's read_path (no schema length limit) of
# 300,000 characters made a 300,000-character reason, in the error and the audited
# decision. The path is quoted cut to its first 64 characters, its length said.
@pytest.mark.parametrize(
    ("path", "access", "rule", "start"),
    [
        ("/etc/" + "a" * 300_000, "read", "paths.absolute", "absolute path '/etc/aaa"),
        ("../" + "a" * 300_000, "read", "paths.escape", "path '../aaa"),
        ("~" + "a" * 300_000, "read", "paths.invalid", "'~' is not expanded; path '~aaa"),
        ("a\x00" + "a" * 300_000, "read", "paths.invalid", "NUL byte in path 'a\\x00aaa"),
        ("x/.env" + "a" * 300_000, "read", "paths.deny", "'x/.envaaa"),
        (".git/" + "a" * 300_000, "write", "paths.deny_write", "'.git/aaa"),
        (["a" * 300_000], "read", "paths.invalid", "path must be a string, not ['aaa"),
    ],
)
def test_a_long_path_is_quoted_cut(path: object, access: str, rule: str, start: str) -> None:
    rules = PathRules(PathsSection(deny=["**/.env*"], deny_write=[".git/**"]))
    v = rules.check(path, access)  # type: ignore[arg-type]
    assert (v.allowed, v.rule) == (False, rule)
    assert v.reason.startswith(start) and "… (3000" in v.reason and len(v.reason) < 200


def test_a_short_path_is_quoted_whole() -> None:
    assert RULES.check("/etc/passwd", "read").reason == (
        "absolute path '/etc/passwd' is outside the workspace"
    )
