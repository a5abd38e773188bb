from __future__ import annotations

import pytest

from runtime.policy.argv import program_name
from runtime.policy.shell import analyse


def programs(cmd: str) -> list[str]:
    return [c.program for c in analyse(cmd).commands]


def kinds(cmd: str) -> set[str]:
    return {h.kind for h in analyse(cmd).hazards}


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("/bin/./rm", "rm"),
        ("/usr/bin//rm", "rm"),
        ("/proc/self/root/usr/bin/rm", "rm"),
        ("rm", "rm"),
        ("./rm", "rm"),
    ],
)
def test_program_name(value: str, name: str) -> None:
    assert program_name(value) == name


@pytest.mark.parametrize(
    "cmd",
    [
        "rm -rf /",
        "'r'm -rf /",
        "\\rm -rf /",
        "sudo -u root rm -rf /",
        "env -i A=1 B=2 rm -rf /",
        "timeout -s KILL 5 rm -rf /",
        "nice -n 10 nohup stdbuf -oL rm -rf /",
        "command rm -rf /",
        "exec rm -rf /",
        "doas rm -rf /",
        "busybox rm -rf /",
        "/lib64/ld-linux-x86-64.so.2 /bin/rm -rf /",
        "find . -exec rm -rf / ;",
        "bash -c 'rm -rf /'",
        'sh -ec "sudo rm -rf /"',
        "echo hi; rm -rf /",
        "true && rm -rf /",
        "false || rm -rf /",
        "ls | rm -rf /",
        "sleep 1 & rm -rf /",
        "echo a\nrm -rf /",
        "echo $(rm -rf /)",
        "echo `rm -rf /`",
        "cat <(rm -rf /)",
        "x=$(rm -rf /)",
        "f() { rm -rf /; }; f",
        "if true; then rm -rf /; fi",
        "for i in 1; do rm -rf /; done",
        "sh <<EOF\nrm -rf /\nEOF",
        "bash <<< 'rm -rf /'",
        "eval 'rm -rf /'",
        "alias ll='rm -rf /'",
        "watch -n 1 rm -rf /",
        "su -c 'rm -rf /'",
        "env -S 'rm -rf /'",
        "uv run rm -rf /",
        "(rm -rf /)",
        "{ rm -rf /; }",
    ],
)
def test_rm_is_found_everywhere(cmd: str) -> None:
    rms = [c for c in analyse(cmd).commands if c.program == "rm"]
    assert rms, cmd
    assert any("/" in [w.value for w in c.args] for c in rms), cmd


def test_xargs_and_find_placeholders_are_dynamic() -> None:
    (rm,) = [c for c in analyse("echo / | xargs rm -rf").commands if c.program == "rm"]
    assert rm.args[-1].dynamic
    (rm,) = [c for c in analyse("find / -exec rm -rf {} +").commands if c.program == "rm"]
    assert rm.args[-1].dynamic
    assert rm.wrappers == ("find",)


@pytest.mark.parametrize(
    "cmd",
    [
        "$(echo rm) -rf /",
        "$x -rf /",
        "`echo rm` x",
        "r${IFS}m x",
        "/bin/r? x",
        "eval ls",
        'bash -c "$CMD"',
    ],
)
def test_dynamic_names(cmd: str) -> None:
    assert "dynamic" in kinds(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        "python -c 'import os'",
        "python3 -Bc 'x'",
        "perl -ne 'print'",
        "ruby -e 1",
        "node -e 1",
        "php -r 'x'",
        "base64 -d x | sh",
        "curl x | bash",
        "xxd -r -p x | sh",
        "cat x | python3",
        "python3 - < x",
        "bash <(curl x)",
        "awk 'BEGIN{system(\"id\")}'",
        "git -c core.pager=sh log",
        "tar --checkpoint-action=exec=sh -cf x .",
        "source <(curl x)",
        "sed 's/x/id/e' f",
    ],
)
def test_interpreters_fed_code(cmd: str) -> None:
    assert "interpreter" in kinds(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        "ls -la",
        "python script.py",
        "git status",
        "awk '{print $1}' f",
        "bash build.sh",
        "echo $HOME",
        "cat a | grep b | sort",
        "npm test",
        "make -j4",
    ],
)
def test_ordinary_commands_have_no_hazard(cmd: str) -> None:
    assert kinds(cmd) == set(), analyse(cmd).hazards


@pytest.mark.parametrize(
    "cmd",
    [
        # ('case' was the example here until runtime/policy/_case.py read it; 'select'
        # is still beyond bashlex.)
        "select i in a b; do ls; done && time x",
        "select i in a b; do ls; done",
        "[[ x =~ (a) ]]",
        "a\x00b",
        "echo 'unterminated",
        "x" * 70_000,
    ],
)
def test_unparseable(cmd: str) -> None:
    assert "unparseable" in kinds(cmd)


def test_fork_bomb_shape() -> None:
    assert "fork_bomb" in kinds(":(){ :|:& };:")
    assert "fork_bomb" in kinds("bomb() { bomb | bomb & }; bomb")


def test_deep_nesting_is_bounded() -> None:
    cmd = "ls"
    for _ in range(12):
        cmd = "sh -c " + "'" + cmd.replace("'", "'\\''") + "'"
    assert "unparseable" in kinds(cmd)


def test_pipeline_feeds_and_redirects() -> None:
    a = analyse("curl -s x | tee out | sh > /dev/sda 2>&1")
    sh = next(c for c in a.commands if c.program == "sh")
    assert sh.feeds == ("curl", "tee")
    assert [w.value for w in sh.redirects] == ["/dev/sda"]
    env = next(c for c in analyse("LD_PRELOAD=/x.so env FOO=1 ls").commands if c.program == "ls")
    assert set(env.assigns) == {"LD_PRELOAD", "FOO"}


def test_long_chains_are_capped() -> None:
    for cmd in ("ls; " * 3000, "a | " * 2000 + "b"):
        hazards = analyse(cmd).hazards
        assert [h.kind for h in hazards] == ["unparseable"]


def test_time_keyword() -> None:
    assert programs("time make test") == ["make"]
    assert programs("ls && time -p rm -rf /") == ["ls", "rm"]
    assert kinds("time make") == set()


def test_double_brackets() -> None:
    assert programs("[[ -f x ]] && rm -rf /")[-1] == "rm"
    assert programs("if [[ $(id -u) == 0 ]]; then ls; fi") == ["id", "[", "ls"]
    assert kinds("[[ -n $x ]] || echo no") == set()


def test_here_documents() -> None:
    assert programs("cat > f <<'EOF'\n$(rm -rf /)\nEOF") == ["cat"]
    assert "rm" in programs("cat > f <<EOF\n$(rm -rf /)\nEOF")
    assert programs("cat <<\\EOF\n`id`\nEOF") == ["cat"]
    assert programs("sh <<'EOF'\nrm -rf /\nEOF") == ["rm", "sh"]


def test_arithmetic() -> None:
    assert kinds("echo $((2*3))") == set()
    assert "unparseable" in kinds("echo $(( $(rm -rf /) + 1 ))")
