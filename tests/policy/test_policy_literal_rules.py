"""Rules that judge literal words only (``literal_only``): the device and kernel-settings
rules, the copies of destructive programs and the long-running servers.

``commands.deny.device-write`` used to read every argument of cp, mv, cat, tee... as a
possible block device, so ``cat "$f"`` and ``cp "$f" backup/`` asked, and the redirect
rules asked for every ``> "$out"``. The sandbox's /dev holds no block device, it mounts no
/sys, a tool never runs as root and its network is gone (seccomp allows AF_UNIX sockets
only), so these rules now judge the files a program writes (``writes_to``) and literal
words (``literal_only``): a run-time target is the kernel's, unless its literal start
already heads for the rule's paths (``/dev/tcp/$h/80``).

The copy rules (a destructive program copied under another name) and the services rules
(a dev server that would block the call) asked for every copy or script run with a variable
in it ('cp "$f" backup/', 'python3 x.py --input "$1"'). A program copied from a run-time
path is one of many ways around a denylist that the kernel stops, and a server started
through a run-time word is ended by the call's timeout: they too match on literal words.
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
        'cat "$f" > out.txt',
        # Copies and renames of run-time paths.
        'cp "$f" backup/',
        'for f in *.txt; do cp "$f" "backup/$f"; done',
        'mv "$f" "${f%.txt}.md"',
        'for f in *.jpeg; do mv "$f" "${f%.jpeg}.jpg"; done',
        'cp -a "$src/." "$dst/"',
        'install -m 0755 bin/tool "$PREFIX/bin/tool"',
        'ln -sf "$(pwd)/bin/tool" bin/current',
        "xargs -I{} cp {} backup/ < files.txt",
        # Programs and scripts given run-time arguments.
        'python3 script.py --input "$1" --output out.json',
        'python3 "$f"',
        'npm run "$script"',
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
        # cat's copy is the file its output goes to: any file ('**').
        ("cat /bin/rm > x", CAT_COPY),
        ('cat /bin/rm > "$out"', CAT_COPY),
        ("cp /bin/rm x", "commands.ask.copy-destructive-binary"),
        ("ln -s /usr/bin/shred s", "commands.ask.copy-destructive-binary"),
    ],
)
def test_may_match_asks(policy: Policy, command: str, rule: str) -> None:
    assert verdict(policy, command) == ("ask", rule), command


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("npm run dev", "commands.service.npm"),
        ("python3 -m http.server", "commands.service.python-http"),
        ('npx vite "$@"', "commands.service.vite"),  # 'vite' is literal
        ('uvicorn "$app"', "commands.service.asgi"),
    ],
)
def test_literal_servers_are_denied(policy: Policy, command: str, rule: str) -> None:
    assert verdict(policy, command) == ("deny", rule), command


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
