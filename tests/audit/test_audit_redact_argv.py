"""The command-line rules across an argv list's elements (a command tool's or custom tool's
array argument): ``["--password", "x"]`` has the element after the option redacted, as
``--password x`` in one string has. The red team's shapes, through the redactor, the audit
log (both encoders: the C gate prefilters on the whole arguments' text) and the CLI."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.audit import REDACTED, AuditLog, canonical_json, redact
from runtime.audit._canonical import sha256_hex
from runtime.audit._redact import Redactor
from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[2]

# (argv, redacted argv): the value element replaced, the option and its neighbours kept.
SHAPES = [
    (
        ["curl", "-H", "Authorization: Bearer sk-live-123", "-u", "bob:hunter2", "-s", "u"],
        ["curl", "-H", f"Authorization: {REDACTED}", "-u", f"bob:{REDACTED}", "-s", "u"],
    ),
    (["tool", "--password", "s3cret", "-v"], ["tool", "--password", REDACTED, "-v"]),
    (["tool", "--token", "t", "--verbose"], ["tool", "--token", REDACTED, "--verbose"]),
    (["x", "--db-password", "pw", "y"], ["x", "--db-password", REDACTED, "y"]),
    (["sshpass", "-p", "x", "ssh", "h"], ["sshpass", "-p", REDACTED, "ssh", "h"]),
    (["mongosh", "-u", "a", "-p", "x", "db"], ["mongosh", "-u", "a", "-p", REDACTED, "db"]),
    (["docker", "login", "-p", "x", "reg"], ["docker", "login", "-p", REDACTED, "reg"]),
    (["redis-cli", "-a", "pw", "ping"], ["redis-cli", "-a", REDACTED, "ping"]),
    (["mysql", "-uroot", "-pS3", "db"], ["mysql", "-uroot", f"-p{REDACTED}", "db"]),
    (["/usr/bin/curl", "--user", "u:p", "h"], ["/usr/bin/curl", "--user", f"u:{REDACTED}", "h"]),
    (["http", "-a", "bob:pw", "h"], ["http", "-a", f"bob:{REDACTED}", "h"]),
    (["curl", "-H", "X-Api-Key: k", "h"], ["curl", "-H", f"X-Api-Key: {REDACTED}", "h"]),
    (["git", "config", "github.token", "t1"], ["git", "config", "github.token", REDACTED]),
    (
        ["aws", "configure", "set", "aws_secret_access_key", "k"],
        ["aws", "configure", "set", "aws_secret_access_key", REDACTED],
    ),
    # An armed option takes the next element whatever it starts with (as getopt does).
    (
        ["curl", "--oauth2-bearer", "abcdef123456", "https://x"],
        ["curl", "--oauth2-bearer", REDACTED, "https://x"],
    ),
    (["tool", "--bearer", "abcdef123456"], ["tool", "--bearer", REDACTED]),
    (["mysql", "--password", "-Xy9q!zz"], ["mysql", "--password", REDACTED]),
    (["tool", "--password", "--verbose"], ["tool", "--password", REDACTED]),
    (["curl", "-u", "-bob:pw", "h"], ["curl", "-u", f"-bob:{REDACTED}", "h"]),
    # Per-program short password options.
    (
        ["ldapsearch", "-x", "-D", "cn=admin", "-w", "hunter22", "-b", "dc=x"],
        ["ldapsearch", "-x", "-D", "cn=admin", "-w", REDACTED, "-b", "dc=x"],
    ),
    (["ldapmodify", "-whunter22"], ["ldapmodify", f"-w{REDACTED}"]),
    (
        ["twine", "upload", "-u", "__token__", "-p", "pypi-AgEIcHlw", "dist/*"],
        ["twine", "upload", "-u", "__token__", "-p", REDACTED, "dist/*"],
    ),
    (
        ["sqlcmd", "-S", "db", "-U", "sa", "-P", "Sq1Pw!", "-Q", "select 1"],
        ["sqlcmd", "-S", "db", "-U", "sa", "-P", REDACTED, "-Q", "select 1"],
    ),
    (
        ["az", "login", "--service-principal", "-u", "app", "-p", "azS3cret", "--tenant", "t"],
        ["az", "login", "--service-principal", "-u", "app", "-p", REDACTED, "--tenant", "t"],
    ),
    (["htpasswd", "-b", ".htp", "bob", "htpw1"], ["htpasswd", "-b", ".htp", "bob", REDACTED]),
    (["htpasswd", "-cbB", ".htp", "bob", "htpw1"], ["htpasswd", "-cbB", ".htp", "bob", REDACTED]),
    (["htpasswd", "-n", "-b", "bob", "htpw1"], ["htpasswd", "-n", "-b", "bob", REDACTED]),
    (
        ["htpasswd", "-b", "-C", "12", ".htp", "bob", "htpw1"],
        ["htpasswd", "-b", "-C", "12", ".htp", "bob", REDACTED],
    ),
]


@pytest.mark.parametrize(("argv", "shown"), SHAPES, ids=lambda v: " ".join(v)[:32])
def test_an_options_value_element_is_redacted(argv: list[str], shown: list[str]) -> None:
    assert redact({"argv": argv}) == {"argv": shown}
    assert redact(argv) == shown  # a bare list, and a tuple, too
    assert redact(tuple(argv)) == shown


@pytest.mark.parametrize(
    "argv",
    [
        ["docker", "run", "-p", "8080:80", "nginx"],  # a port: -p is a password after login
        ["mysql", "-u", "root", "-p", "mydb"],  # -p alone prompts; "mydb" is the database
        ["ssh", "-p", "2222", "user@host"],
        ["curl", "-u", "admin", "https://h/x"],  # no password: curl asks for it
        ["docker", "login", "--password-stdin", "-u", "me", "registry"],
        ["tool", "--token-file", "/run/secrets/t"],
        ["echo", "pass", "the", "salt"],
        ["--password", None, "x"],  # no adjacency across a non-string
        ["--password", {"a": 1}, "x"],
        ["az", "vm", "create", "-p", "x"],  # az's -p is a password only after login
        ["htpasswd", "-c", ".htp", "bob"],  # no -b: htpasswd asks for it
        ["htpasswd", "-D", ".htp", "bob"],
        ["twine", "check", "dist/x.whl"],
        ["ldapsearch", "-x", "-b", "dc=x", "uid=bob"],
    ],
    ids=lambda v: " ".join(map(str, v))[:32],
)
def test_ordinary_argv_lists_are_kept(argv: list[Any]) -> None:
    assert redact({"argv": argv}) == {"argv": argv}


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["cmd", "--password", 12345678], ["cmd", "--password", REDACTED]),
        (["cmd", "--token", 1.5, "x"], ["cmd", "--token", REDACTED, "x"]),
        (["sshpass", "-p", True, "ssh"], ["sshpass", "-p", REDACTED, "ssh"]),
        (
            ["cmd", "--password", 3, "--token", "x"],
            ["cmd", "--password", REDACTED, "--token", REDACTED],
        ),
    ],
)
def test_a_scalar_after_an_armed_option_is_redacted(argv: list[Any], shown: list[Any]) -> None:
    assert redact({"argv": argv}) == {"argv": shown}


@pytest.mark.parametrize(
    ("argv", "shown"),
    [shape for shape in SHAPES if not any(" " in word for word in shape[0])],
    ids=lambda v: " ".join(v)[:32],
)
def test_the_same_rules_in_one_command_line(argv: list[str], shown: list[str]) -> None:
    """The string form of each shape (whose words hold no blank, so that joined they are
    the same words): the same values hidden."""
    assert redact(" ".join(argv)) == " ".join(shown)


def test_the_policy_names_apply_across_elements() -> None:
    argv = ["npm", "config", "set", "tenant_id", "acme"]
    assert redact(argv, ["tenant-id"]) == ["npm", "config", "set", "tenant_id", REDACTED]
    assert redact(argv) == argv


def test_long_argv_lists_finish() -> None:
    # Linear: one pass over the elements (a super-linear rule would hit the test timeout).
    argv = ["curl", "-u"] * 50_000 + ["--password"] * 50_000 + ["x"]
    out = redact(argv)
    assert out[-1] == REDACTED and out[2] == "curl"


@pytest.mark.parametrize(("argv", "shown"), SHAPES, ids=lambda v: " ".join(v)[:32])
def test_the_gate_opens_for_argv_secrets(argv: list[str], shown: list[str]) -> None:
    """The audit log skips the walk when the gate is closed over the whole arguments' text:
    the word that arms the argv rule opens it, though the value alone looks harmless."""
    text = canonical_json({"argv": argv}).decode("utf-8")
    assert Redactor().may_redact(text)


def _cli(*args: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": python_path(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        cwd=cwd, capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    return proc.stdout


def test_argv_secrets_never_reach_the_log_or_its_exports(log: AuditLog, tmp_path: Path) -> None:
    secrets = ("sk-live-123", "hunter2", "s3cret", "k3y", "t0k")
    argv = [
        "curl", "-H", "Authorization: Bearer sk-live-123", "-u", "bob:hunter2",
        "--password", "s3cret", "-H", "X-Api-Key: k3y", "--token", "t0k", "https://h/x",
    ]  # fmt: skip
    args = {"argv": argv, "cwd": "."}
    rec = log.record_request(
        call_id="c1",
        tool="custom_curl",
        arguments=args,
        decision={"action": "allow", "rule": "r"},
        backend="subprocess",
        sandbox=None,
    )
    assert rec.arguments == {
        "argv": [
            "curl", "-H", f"Authorization: {REDACTED}", "-u", f"bob:{REDACTED}",
            "--password", REDACTED, "-H", f"X-Api-Key: {REDACTED}", "--token", REDACTED,
            "https://h/x",
        ],
        "cwd": ".",
    }  # fmt: skip
    # The digest of the real arguments is still there: keyed, since redaction changed them.
    assert rec.arguments_digest is not None and rec.arguments_digest.startswith("hmac-sha256:")
    assert rec.arguments_digest == log.digest_arguments(args)
    assert rec.arguments_digest != sha256_hex(canonical_json(args))
    assert log.tail(1)[0] == rec
    out = io.StringIO()
    log.export_jsonl(out)
    log.close()
    tail = _cli("audit", "tail", "-n", "5", "--audit", str(log.path), cwd=tmp_path)
    export = _cli("audit", "export", "--jsonl", "--audit", str(log.path), cwd=tmp_path)
    for text in (out.getvalue(), tail, export, log.path.read_bytes().decode("latin-1")):
        assert not [s for s in secrets if s in text]
    assert json.loads(export.splitlines()[0])["arguments"] == rec.arguments
