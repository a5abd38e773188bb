"""The device and kernel-settings rules: what a program writes, on literal words.

``commands.deny.device-write`` used to read every argument of cp, mv, cat, tee... as a
possible block device, so ``cat "$f"`` and ``cp "$f" backup/`` asked, and the redirect
rules asked for every ``> "$out"``. The sandbox's /dev holds no block device, it mounts no
/sys, a tool never runs as root and its network is gone (seccomp allows AF_UNIX sockets
only), so these rules now judge the files a program writes (``writes_to``) and literal
words (``literal_only``): a run-time target is the kernel's, unless its literal start
already heads for the rule's paths (``/dev/tcp/$h/80``).
"""

from __future__ import annotations

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy

DEVICE = "commands.deny.device-write"
REDIRECT = "commands.deny.redirect-device"
DD = "commands.deny.dd-device"
TCP = "commands.deny.dev-tcp"
SYSRQ = "commands.deny.sysrq"
CAT_COPY = "commands.ask.cat-destructive-binary"


@pytest.mark.parametrize(
    "command",
    [
        'cat "$f"',
        'cat "$f" | grep x',
        'touch "$f"',
        'mkdir -p "$d"',
        "mkdir -p src/{components,utils}",
        'sed -i s/a/b/ "$f"',
        'chmod 644 "$f"',
        'tee "$log"',
        'sort -o "$f" "$f"',
        'echo x > "$out"',
        'echo x > out/"$f"',
        'make > "$LOG_DIR/build.log" 2>&1',
        'for f in *.md; do sed "s/a/b/" "$f" > "${f%.md}.txt"; done',
        'dd if="$f" of=out.img',
        'dd if=x of="$d"',
        "cat /bin/rm | grep ELF",  # no copy is made
    ],
)
def test_everyday_writes_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("cp x /dev/sda", DEVICE),
        ("cat x | tee /dev/nvme0n1", DEVICE),
        ("cd /dev && cp x sda", DEVICE),
        ("sudo cp x /dev/sda", DEVICE),
        ("cp -t /dev/sda x", DEVICE),
        ("mv x /dev/nvme0n1", DEVICE),
        ("shred /dev/sda", DEVICE),
        ("ln -sf x /dev/sda", DEVICE),
        ("install -D x /dev/sdb", DEVICE),
        ("truncate -s 0 /dev/mem", DEVICE),
        ("dd if=/dev/zero of=/dev/sda bs=1M", DD),
        ("echo x > /dev/sda", REDIRECT),
        ("echo x >//dev//sda", REDIRECT),
        ("cd /dev; echo x > sda", REDIRECT),  # the redirect seen from where cd went
        ("cat < /dev/tcp/example.com/80", TCP),
        ("echo b > /proc/sysrq-trigger", SYSRQ),
    ],
)
def test_literal_device_writes_are_denied(policy: Policy, command: str, rule: str) -> None:
    assert verdict(policy, command) == ("deny", rule), command


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        # A run-time word whose literal start heads for the rule's paths.
        ("echo x > /dev/tcp/$h/80", TCP),
        ('echo x > "/dev/tcp/$h/80"', TCP),
        ('tee /dev/sd"$n"', DEVICE),
        ('dd if=x of=/dev/"$d"', DD),
        ('cp -t/dev/"$x" f', DEVICE),
        ('cp --target-directory=/dev/sd"$x" f', DEVICE),
        ('echo 1 > /proc/sys/"$k"', SYSRQ),
        # A program named among an unknown program's arguments: a guess.
        ("ifne cp x /dev/sda", DEVICE),
        # cat's copy is the file its output goes to.
        ("cat /bin/rm > x", CAT_COPY),
        ('cat "$f" > out.txt', CAT_COPY),
    ],
)
def test_may_match_asks(policy: Policy, command: str, rule: str) -> None:
    assert verdict(policy, command) == ("ask", rule), command


def _custom(literal_only: bool) -> Policy:
    return Policy.from_toml(
        f"""
version = 1
[categories]
shell = "allow"
[[commands.rules]]
id = "mine.no-secrets"
action = "deny"
program = ["upload"]
args = ["/secret/**"]
literal_only = {str(literal_only).lower()}
""",
        "<test>",
    )


@pytest.mark.parametrize(
    ("literal_only", "command", "expected"),
    [
        (False, "upload /secret/a", ("deny", "mine.no-secrets")),
        (False, 'upload "$f"', ("ask", "mine.no-secrets")),
        (True, "upload /secret/a", ("deny", "mine.no-secrets")),
        (True, 'upload "$f"', ("allow", "categories.shell")),
    ],
)
def test_literal_only_in_a_policy_file(
    literal_only: bool, command: str, expected: tuple[str, str]
) -> None:
    assert verdict(_custom(literal_only), command) == expected
