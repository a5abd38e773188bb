from __future__ import annotations

import pytest

from runtime.policy.globs import GlobSet, compile_glob


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("*.py", "a.py", True),
        ("*.py", "src/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "src/deep/a.py", True),
        (".git/**", ".git", True),
        (".git/**", ".git/hooks/pre-commit", True),
        (".git/**", ".gitignore", False),
        ("**/.env", ".env", True),
        ("**/.env", "a/b/.env", True),
        ("**/.env", "a/b/.envrc", False),
        ("**", "", True),
        ("**", "anything/at/all", True),
        ("src/**/test_*.py", "src/test_x.py", True),
        ("src/**/test_*.py", "src/a/b/test_x.py", True),
        ("[*]", "*", True),
        ("[*]", "build", False),
        ("file?.txt", "file1.txt", True),
        ("file?.txt", "file/.txt", False),
        ("[!a]bc", "xbc", True),
        ("[!a]bc", "abc", False),
        ("/*", "/etc", True),
        ("/*", "/etc/passwd", False),
        ("/", "/", True),
        ("a[", "a[", True),
    ],
)
def test_glob(pattern: str, path: str, hit: bool) -> None:
    assert (compile_glob(pattern).fullmatch(path) is not None) is hit


def test_casefold_and_globset_names_the_pattern() -> None:
    gs = GlobSet(["**/*.pem", "**/.env"], casefold=True)
    assert gs.match("keys/SERVER.PEM") == "**/*.pem"
    assert gs.match("x/.ENV") == "**/.env"
    assert gs.match("x/readme") is None
    assert not GlobSet([])
    assert GlobSet([]).match("x") is None
