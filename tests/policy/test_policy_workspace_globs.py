"""``[paths]`` globs have one spelling, fixed at load (``runtime.policy._workspace_globs``).

The red team's finding K2: ``write = ["./out/**"]`` (or ``/workspace/out/**``) matched no
normalised path, so ``write_file out/w.txt`` was refused, while the sandbox read the glob's
empty literal head as "anywhere" and left the whole workspace writable for ``shell_exec``;
the same spelling in ``deny`` denied nothing. Each spelling is now the glob it means, and a
glob that names no path inside the workspace is refused with the list and the glob named.
The kernel side is tested in tests/sandbox/escape/test_escape_narrow_meta.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.backends.sandbox._narrow import narrow_prefixes
from runtime.policy import Policy, PolicyError
from runtime.policy._workspace_globs import workspace_glob
from runtime.policy.paths import PathRules, allow_globs, mask_globs

LISTS = ("read", "write", "deny", "deny_read", "deny_write")

#: Spellings of 'out/**' a policy author may write: each now loads as 'out/**'.
SPELLINGS = (
    "./out/**",
    "/workspace/out/**",
    "//workspace//out/**",
    "/workspace/./out/**",
    "out//**",
    "./out/./**",
    "././out/**",
)


def _paths(body: str) -> PathRules:
    return PathRules(Policy.from_toml(f"[paths]\n{body}\n").document.paths)


@pytest.mark.parametrize("field", LISTS)
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_a_workspace_glob_loads_as_the_glob_it_means(
    field: str, spelling: str
) -> None:
    doc = Policy.from_toml(f'[paths]\n{field} = ["{spelling}", "**/.env"]\n').document
    assert getattr(doc.paths, field) == ["out/**", "**/.env"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_dotted_write_glob_lets_the_file_tools_write_there(spelling: str) -> None:
    """The finding's first half: 'write_file out/w.txt' was refused paths.write."""
    rules = _paths(f'read = ["**"]\nwrite = ["{spelling}"]')
    assert rules.check("out/w.txt", "write").allowed
    assert rules.check("/workspace/out/w.txt", "write").allowed
    verdict = rules.check("pub/evil", "write")
    assert (verdict.allowed, verdict.rule) == (False, "paths.write")


@pytest.mark.parametrize("spelling", ["./secrets/**", "/workspace/secrets/**", "secrets//**"])
def test_a_dotted_deny_glob_denies(spelling: str) -> None:
    """``deny = ["./secrets/**"]`` denied nothing, lexically or as a mask."""
    rules = _paths(f'deny = ["{spelling}"]')
    for path in ("secrets/key", "./secrets/key", "/workspace/secrets", "secrets"):
        verdict = rules.check(path, "read")
        assert (verdict.allowed, verdict.rule) == (False, "paths.deny"), path
    doc = Policy.from_toml(f'[paths]\ndeny = ["{spelling}"]\n').document
    assert mask_globs(doc.paths) == (("secrets/**",), ())


def test_what_the_sandbox_gets_is_narrowed_to_the_prefix() -> None:
    """The finding's second half: the write prefixes the sandbox binds are 'out', not the
    whole workspace (narrow_prefixes None)."""
    doc = Policy.from_toml('[paths]\nread = ["**"]\nwrite = ["./out/**"]\n').document
    read, write = allow_globs(doc.paths)
    assert (read, write) == (None, ("out/**",))
    assert narrow_prefixes(write) == ("out",)
    whole = Policy.from_toml('[paths]\nwrite = ["/workspace/**"]\n').document
    assert allow_globs(whole.paths) == (None, None)  # '**': not narrowed


def test_a_workspace_root_other_than_the_sandboxs_is_refused() -> None:
    """The sandbox and the tools show the workspace at /workspace, always. Another root
    ('/proj', '/workspace/app') was read by the policy alone: '/proj/x' passed the path
    rules and failed in the tool, and the command rules missed '/workspace' (what the shell
    really reaches): 'rm -rf /workspace/*' was allowed. Such a policy is refused."""
    for root in ("/proj", "/workspace/app", "/srv/ws", "workspace"):
        text = f'version = 1\n[paths]\nworkspace_root = "{root}"\n'
        with pytest.raises(PolicyError, match=r"t\.toml:3: paths\.workspace_root: .*/workspace"):
            Policy.from_toml(text, "t.toml")
    for root in ("/workspace", "/workspace/"):
        doc = Policy.from_toml(f'[paths]\nworkspace_root = "{root}"\nwrite = ["/workspace/o/**"]\n')
        assert (doc.document.paths.workspace_root, doc.document.paths.write) == (
            "/workspace",
            ["o/**"],
        )


@pytest.mark.parametrize(
    ("glob", "why"),
    [
        ("../out/**", "'..' segment"),
        ("out/../pub/**", "'..' segment"),
        ("/workspace/../etc/**", "'..' segment"),
        ("/etc/**", "absolute path outside the workspace"),
        ("/workspace-evil/**", "absolute path outside the workspace"),
        ("/tmp/ws/out/**", "absolute path outside the workspace"),  # a host path
        ("/**", "absolute path outside the workspace"),
        ("/", "absolute path outside the workspace"),
        ("", "empty glob"),
        (".", "workspace root itself"),
        ("./", "workspace root itself"),
        ("/workspace", "workspace root itself"),
        ("/workspace/", "workspace root itself"),
        ("out/", "ends with '/'"),
        ("./secrets/", "ends with '/'"),
    ],
)
@pytest.mark.parametrize("field", LISTS)
def test_a_glob_that_names_no_path_in_the_workspace_is_refused(
    field: str, glob: str, why: str, tmp_path: Path
) -> None:
    """A typed PolicyError naming the file, line, list and glob; nothing loads."""
    f = tmp_path / "p.toml"
    f.write_text(f'default = "deny"\n[paths]\n{field} = ["out/**", "{glob}"]\n')
    with pytest.raises(PolicyError) as info:
        Policy.load(f)
    err = info.value
    assert err.details["field"] == f"paths.{field}", err.message
    assert err.details["line"] == 3, err.message
    assert why in err.message and repr(glob) in err.message, err.message
    assert err.message.startswith(f"{f}:3: paths.{field}: ")


def test_a_trailing_slash_is_told_what_to_write_instead() -> None:
    with pytest.raises(PolicyError, match=r"write 'out/\*\*' for the directory .* or 'out'"):
        Policy.from_toml('[paths]\ndeny = ["./out/"]\n')


_SEGMENT = st.sampled_from(["", ".", "..", "out", "a b", "*", "**", "*.py", "[ab]", "workspace"])


@given(st.lists(_SEGMENT, min_size=1, max_size=6), st.booleans())
@settings(max_examples=500, deadline=None)
def test_an_accepted_glob_never_widens_the_sandbox(segs: list[str], absolute: bool) -> None:
    """Whatever is accepted has no empty, '.' or '..' segment and is relative, so the
    sandbox's prefixes are either a literal head (a real path in the workspace) or, for a
    wildcard head only, the whole workspace."""
    glob = ("/" if absolute else "") + "/".join(segs)
    try:
        got = workspace_glob(glob)
    except ValueError:
        return
    parts = got.split("/")
    assert not got.startswith("/") and not {"", ".", ".."} & set(parts), (glob, got)
    prefixes = narrow_prefixes([got])
    if prefixes is None:
        assert set(parts[0]) & set("*?["), (glob, got)
    else:
        (prefix,) = prefixes
        assert got == prefix or got.startswith(prefix + "/"), (glob, got)


@pytest.mark.parametrize("field", LISTS)
@pytest.mark.parametrize(
    ("glob", "says"),
    [
        ("**/*.{pem,key}", "list the globs separately ('**/*.pem', '**/*.key')"),
        ("./src/{a,b}/**", "list the globs separately ('src/a/**', 'src/b/**')"),
        ("logs/f{1..3}.txt", "list the globs separately (each glob of the sequence)"),
        ("!public/**", "a leading '!' does not negate"),
        ("/workspace/!public/**", "a leading '!' does not negate"),
    ],
)
def test_shell_braces_and_a_leading_bang_are_refused_with_a_hint(
    field: str, glob: str, says: str, tmp_path: Path
) -> None:
    """Read literally, 'deny = ["**/*.{pem,key}"]' protected nothing and '!public/**'
    excepted nothing: both are refused, naming file, line, list and glob."""
    f = tmp_path / "p.toml"
    f.write_text(f'default = "deny"\n[paths]\n{field} = ["out/**", "{glob}"]\n')
    with pytest.raises(PolicyError) as info:
        Policy.load(f)
    err = info.value
    assert (err.details["field"], err.details["line"]) == (f"paths.{field}", 3), err.message
    assert says in err.message and repr(glob) in err.message, err.message


@pytest.mark.parametrize("glob", ["secrets/[!p]*", "a/{b}", "x/!y", "[{]a,b[}]", "[!.]*"])
def test_classes_a_lone_brace_and_an_inner_bang_still_load(glob: str) -> None:
    """'[!p]' is a class, '{b}' is not a brace expansion (bash leaves it too), an inner '!'
    negates nothing in gitignore either, and '[{]' is how a literal brace is written."""
    assert Policy.from_toml(f'[paths]\ndeny = ["{glob}"]\n').document.paths.deny == [glob]


def test_a_literal_brace_written_as_a_class_matches_the_name() -> None:
    rules = _paths('deny = ["[{]a,b[}]"]')
    assert not rules.check("{a,b}", "read").allowed
    assert rules.check("a", "read").allowed
