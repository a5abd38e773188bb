"""Fuzzing the command policy (runtime/policy): generated wrapper, path, quoting, compound
and substitution forms of commands the default rules deny are never allowed (deny, or ask a
human — never a silent allow)."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

policy_mod = pytest.importorskip("runtime.policy")
from runtime.catalogue import Catalogue  # noqa: E402
from runtime.models import ToolCall  # noqa: E402


@pytest.fixture(scope="module")
def decide():
    policy = policy_mod.Policy.default()
    spec = Catalogue().get("shell_exec")

    def run(command: str) -> str:
        call = ToolCall(tool="shell_exec", arguments={"command": command})
        return str(policy.decide(call, spec).action)

    return run


# denied cores: (program, args); rm -rf / is the archetype
CORES = [
    ("rm", ["-rf", "/"]),
    ("rm", ["-r", "-f", "/"]),
    ("rm", ["-fr", "/*"]),
    ("rm", ["--recursive", "--force", "~"]),
    ("rm", ["-rf", "--no-preserve-root", "/"]),
    ("rm", ["-rf", "--", "/"]),
    ("find", ["/", "-delete"]),
    ("mkfs.ext4", ["/dev/sda1"]),
    ("dd", ["if=/dev/zero", "of=/dev/sda"]),
]
PROGRAM_FORMS = [
    "{p}",
    "/bin/{p}",
    "/usr/bin/{p}",
    "/bin/./{p}",
    "//bin//{p}",
    "/usr/bin/../bin/{p}",
    "/proc/self/root/bin/{p}",
    "/proc/self/root/usr/bin/{p}",
    "/lib64/ld-linux-x86-64.so.2 /bin/{p}",
    "'{p}'",
    '"{p}"',
    "\\{p}",
]
WRAPPERS = [
    "",
    "sudo ",
    "sudo -u root ",
    "env ",
    "env -i ",
    "env X=1 ",
    "nice ",
    "nice -n 5 ",
    "timeout 5 ",
    "timeout -s KILL 5 ",
    "nohup ",
    "command ",
    "exec ",
    "time ",
    "xargs -0 ",
    "stdbuf -o0 ",
    "setsid ",
    "chroot / ",
    "busybox ",
    "doas ",
    "ionice -c3 ",
    "strace -f ",
]
COMPOUND = [
    "{c}",
    "true && {c}",
    "false || {c}",
    "echo hi; {c}",
    "echo | {c}",
    "{c} &",
    "( {c} )",
    "{{ {c}; }}",
    "if true; then {c}; fi",
    "for i in 1; do {c}; done",
    "echo\n{c}",
    "sh -c {q}",
    "bash -c {q}",
    "eval {q}",
    "$({c})",
    "`{c}`",
    "echo $({c})",
    "x=$({c})",
    "while true; do {c}; break; done",
    "! {c}",
    "{c} > /dev/null 2>&1",
    "{c} | cat",
]


@st.composite
def denied(draw):
    prog, args = draw(st.sampled_from(CORES))
    form = draw(st.sampled_from(PROGRAM_FORMS)).format(p=prog)
    wrap = draw(st.sampled_from(WRAPPERS))
    core = f"{wrap}{form} {' '.join(args)}"
    tpl = draw(st.sampled_from(COMPOUND))
    return tpl.format(c=core, q=shlex.quote(core))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(denied())
@example("sudo env X=1 timeout 5 /bin/./rm -r -f -- /")
@example("find / -delete")
@example("bash -c 'rm -rf /'")
def test_denied_commands_are_never_allowed(decide, command):
    assert decide(command) != "allow", command


@pytest.mark.parametrize(
    "command",
    ["ls -la", "rm -rf ./build", "echo hello", "git status", "cat notes.txt | wc -l"],
)
def test_ordinary_commands_are_allowed(decide, command):
    # not vacuous: the same decide() says allow to ordinary commands
    assert decide(command) == "allow"
