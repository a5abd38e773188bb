from __future__ import annotations

import pytest
from _policy_helpers import decide, make_spec
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import ManifestError
from runtime.models import ToolCall
from runtime.policy import Policy

POLICY = Policy.from_toml(
    """
default = "deny"

[limits]
timeout_s = 20
memory_mb = 256
max_concurrent = 5

[categories]
file = "allow"
data = "allow"
shell = "allow"
network = "allow"
mcp = "ask"

[tools.delete_file]
action = "ask"
reason = "deleting needs a human"
budget = 3

[tools."json_*"]
limits = { output_bytes = 1000 }
budget = 10

[tools.json_parse]
limits = { output_bytes = 2000, timeout_s = 5 }

[tools.sleep]
action = "allow"

[[rules]]
id = "sleep.long"
tools = ["sleep"]
action = "deny"
reason = "too long"
when = [{ arg = "seconds", gt = 10 }]

[[rules]]
id = "sleep.medium"
tools = ["sleep"]
action = "ask"
when = [{ arg = "seconds", ge = 5 }, { arg = "seconds", le = 10 }]

[[rules]]
id = "json.forbidden"
categories = ["data"]
action = "deny"
when = [{ arg = "mode", in = ["eval", "exec"] }]

[[rules]]
id = "json.pattern"
tools = ["json_parse"]
action = "deny"
when = [{ arg = "opts.name", regex = "^secret" }]

[[rules]]
id = "json.glob"
tools = ["json_parse"]
action = "ask"
when = [{ arg = "file", glob = "*.bin" }, { arg = "force", exists = false }]

[network]
allow = ["example.com"]
timeout_s = 45

[profiles.reader]
tools = ["read_file", "list_files"]
limits = { timeout_s = 3 }

[profiles.data]
categories = ["data"]

[env]
pass = ["POLICY_TEST_*", "POLICY_TEST_EXACT"]
set = { LANG = "C.UTF-8" }

[audit]
redact = ["x-api-key"]

[sandbox]
mode = "best_effort"
""",
    "engine-test.toml",
)


def test_accessors() -> None:
    assert POLICY.sandbox_mode == "best_effort"
    assert POLICY.max_concurrent == 5
    assert POLICY.redact_keys == frozenset({"x-api-key"})
    assert POLICY.budget("delete_file") == 3
    assert POLICY.budget("json_stringify") == 10
    assert POLICY.budget("json_parse") == 10
    assert POLICY.budget("read_file") is None
    assert POLICY.network.allow == ["example.com"]


def test_default_deny_and_rule_ids() -> None:
    d = decide(POLICY, "mystery")
    assert (d.action, d.rule) == ("deny", "default")
    d = decide(POLICY, "read_file", path="a.txt")
    assert (d.action, d.rule) == ("allow", "categories.file")
    d = decide(POLICY, "delete_file", path="a.txt")
    assert (d.action, d.rule, d.reasons) == ("ask", "tools.delete_file", ["deleting needs a human"])
    d = decide(POLICY, "mcp_thing")
    assert (d.action, d.rule) == ("ask", "categories.mcp")


def test_deny_beats_ask_beats_allow() -> None:
    assert decide(POLICY, "sleep", seconds=1).action == "allow"
    d = decide(POLICY, "sleep", seconds=7)
    assert (d.action, d.rule) == ("ask", "sleep.medium")
    d = decide(POLICY, "sleep", seconds=11)
    assert (d.action, d.rule, d.reasons) == ("deny", "sleep.long", ["too long"])
    # a path deny beats the ask of the tool entry
    d = decide(POLICY, "delete_file", path="../x")
    assert (d.action, d.rule) == ("deny", "paths.escape")


def test_conditions() -> None:
    assert decide(POLICY, "json_parse", mode="exec").rule == "json.forbidden"
    assert decide(POLICY, "json_parse", mode="read").action == "allow"
    assert decide(POLICY, "json_parse", opts={"name": "secret-x"}).rule == "json.pattern"
    assert decide(POLICY, "json_parse", opts="secret").action == "allow"
    assert decide(POLICY, "json_parse", file="a.bin").rule == "json.glob"
    assert decide(POLICY, "json_parse", file="a.bin", force=True).action == "allow"
    assert decide(POLICY, "sleep", seconds=True).action == "allow"  # bool is not a number


def test_argument_roles() -> None:
    d = decide(POLICY, "shell_exec", command="rm -rf /", cwd=".")
    assert (d.action, d.rule) == ("deny", "commands.deny.rm-root")
    d = decide(POLICY, "shell_exec", command="ls", cwd="/etc")
    assert (d.action, d.rule) == ("deny", "paths.absolute")
    d = decide(POLICY, "move_file", source="a", destination="../b")
    assert d.rule == "paths.escape"
    d = decide(POLICY, "read_file", path=["a", "/etc/passwd"])
    assert d.rule == "paths.absolute"
    assert decide(POLICY, "shell_exec", command="ls", cwd=None).action == "allow"
    deep: list[object] = ["a"]
    for _ in range(5000):
        deep = [deep]
    assert decide(POLICY, "read_file", path=deep).rule == "paths.invalid"
    assert decide(POLICY, "read_file", path=[["a"]]).rule == "paths.invalid"


def test_url_role_and_network_grant() -> None:
    d = decide(POLICY, "http_get", url="https://example.com/x")
    assert d.action == "allow"
    assert d.network["allowed"] is True
    assert d.network["urls"] == [
        {
            "url": "https://example.com/x",
            "scheme": "https",
            "host": "example.com",
            "port": 443,
            "rule": "network.allow",
        }
    ]
    assert d.network["timeout_s"] == 45
    for url, rule in [
        ("https://evil.com/", "network.default"),
        ("https://example.com@evil.com/", "network.invalid-url"),
        ("http://127.0.0.1:6666\\@1.1.1.1", "network.invalid-url"),
        (" https://example.com", "network.invalid-url"),
        ("file:///etc/passwd", "network.invalid-url"),
        ("gopher://example.com/", "network.scheme"),
        ("http://[::1]/", "network.private"),
        ("http://0x7f000001/", "network.invalid-host"),
        ("https://example.com:99999/", "network.invalid-url"),
        ("https://\uff45xample.com/", "network.allow"),
    ]:
        d = decide(POLICY, "http_get", url=url)
        if rule == "network.allow":
            assert d.action == "allow", url
        else:
            assert (d.action, d.rule) == ("deny", rule), url
            assert d.network["allowed"] is False
    d = decide(POLICY, "web_search", query="x")
    assert d.network["egress"] is True and d.network["allowed"] is True
    assert decide(POLICY, "json_parse").network == {}


def test_limits() -> None:
    d = decide(POLICY, "read_file", path="a")
    assert (d.limits.timeout_s, d.limits.memory_mb, d.limits.output_bytes) == (20, 256, 1048576)
    d = decide(POLICY, "json_parse")
    assert (d.limits.timeout_s, d.limits.output_bytes) == (5, 2000)
    assert decide(POLICY, "json_stringify").limits.output_bytes == 1000
    # network tools: the global timeout was set explicitly, so it wins over [network] timeout_s
    assert decide(POLICY, "http_get", url="https://example.com").limits.timeout_s == 20
    plain = Policy.from_toml("[categories]\nnetwork = 'allow'\n[network]\nallow=['a.com']")
    assert decide(plain, "http_get", url="https://a.com").limits.timeout_s == 60
    assert decide(plain, "json_parse").limits.timeout_s == 30
    # a manifest can only lower limits
    call = ToolCall(tool="read_file", arguments={"path": "a"})
    spec = make_spec("read_file", limits={"timeout_s": 2, "memory_mb": 99999})
    d = POLICY.decide(call, spec)
    assert (d.limits.timeout_s, d.limits.memory_mb) == (2, 256)
    with pytest.raises(ManifestError):
        POLICY.decide(call, make_spec("read_file", limits={"timeout_s": 0}))


def test_profiles() -> None:
    d = decide(POLICY, "read_file", profile="reader", path="a")
    assert (d.action, d.profile, d.limits.timeout_s) == ("allow", "reader", 3)
    d = decide(POLICY, "write_file", profile="reader", path="a")
    assert (d.action, d.rule) == ("deny", "profiles.reader")
    assert decide(POLICY, "json_parse", profile="data").action == "allow"
    assert decide(POLICY, "read_file", profile="data", path="a").rule == "profiles.data"
    assert decide(POLICY, "read_file", profile="nope", path="a").rule == "profiles.unknown"
    call = ToolCall(tool="write_file", arguments={"path": "a"}, context={"profile": "reader"})
    assert POLICY.decide(call, make_spec("write_file")).rule == "profiles.reader"


def test_tool_visible() -> None:
    assert POLICY.tool_visible("read_file")
    assert POLICY.tool_visible("sleep")
    assert not POLICY.tool_visible("mystery")
    assert not POLICY.tool_visible("write_file", profile="reader")
    assert POLICY.tool_visible("read_file", profile="reader")
    assert POLICY.tool_visible_spec(make_spec("mcp_thing"))
    default = Policy.default()
    assert not default.tool_visible("http_get")
    assert default.tool_visible("shell_exec")
    assert default.tool_visible("json_parse")


def test_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLICY_TEST_A", "a")
    monkeypatch.setenv("POLICY_TEST_EXACT", "e")
    monkeypatch.setenv("POLICY_SECRET", "s")
    env = POLICY.env({"FOO": "bar", "LD_PRELOAD": "/x.so", "PATH": "/evil", "LANG": "fr"})
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "POLICY_TEST_A": "a",
        "POLICY_TEST_EXACT": "e",
        "LANG": "fr",
        "FOO": "bar",
    }
    call = ToolCall(tool="json_parse", context={"env": {"FOO": "1"}})
    assert POLICY.decide(call, make_spec("json_parse")).env["FOO"] == "1"
    assert "POLICY_SECRET" not in Policy.default().env({})
    assert Policy.default().env({})["PATH"].startswith("/usr/local/bin")


def test_decisions_do_not_share_limits() -> None:
    a = decide(POLICY, "read_file", path="a")
    a.limits.timeout_s = 1
    assert decide(POLICY, "read_file", path="a").limits.timeout_s == 20


def test_default_policy_contract(default_policy: Policy) -> None:
    p = default_policy
    assert p.sandbox_mode == "strict"
    assert p.max_concurrent == 3
    cases = [
        ("read_file", {"path": "src/x.py"}, "allow"),
        ("write_file", {"path": "src/x.py"}, "allow"),
        ("read_file", {"path": ".env"}, "deny"),
        ("read_file", {"path": "keys/a.pem"}, "deny"),
        ("read_file", {"path": ".ssh/id_rsa"}, "deny"),
        ("read_file", {"path": ".git/config"}, "allow"),
        ("write_file", {"path": ".git/hooks/post-checkout"}, "deny"),
        ("read_file", {"path": ".runtime/audit.db"}, "deny"),
        ("write_file", {"path": ".runtime/x"}, "deny"),
        ("shell_exec", {"command": "pytest -q", "cwd": "."}, "allow"),
        ("shell_exec", {"command": "rm -rf /"}, "deny"),
        ("http_get", {"url": "https://example.com"}, "deny"),
        ("web_search", {"query": "x"}, "deny"),
        ("json_parse", {"text": "1"}, "allow"),
        ("mcp_thing", {}, "deny"),
    ]
    for tool, args, action in cases:
        assert decide(p, tool, **args).action == action, (tool, args)


@given(
    st.dictionaries(
        st.sampled_from(["path", "command", "cwd", "url", "seconds"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
            max_leaves=6,
        ),
    )
)
@settings(max_examples=300, deadline=None)
def test_decide_never_raises_on_arguments(arguments: dict[str, object]) -> None:
    for tool in ("read_file", "write_file", "shell_exec", "http_get", "sleep"):
        d = POLICY.decide(ToolCall(tool=tool, arguments=arguments), make_spec(tool))
        assert d.action in ("allow", "ask", "deny")


def test_env_cache_follows_session_and_host(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = Policy.from_toml('[env]\npass = ["POLICY_CACHE_X"]\n')
    session: dict[str, str] = {"A": "1"}
    first = policy.env(session)
    assert first["A"] == "1" and "POLICY_CACHE_X" not in first
    first["A"] = "edited"  # a caller's edit never reaches the cache
    assert policy.env(session)["A"] == "1"
    session["A"] = "2"  # the broker mutates the session dict in place
    session["B"] = "3"
    again = policy.env(session)
    assert (again["A"], again["B"]) == ("2", "3")
    monkeypatch.setenv("POLICY_CACHE_X", "host")
    assert policy.env(session)["POLICY_CACHE_X"] == "host"
    monkeypatch.setenv("POLICY_CACHE_X", "changed")
    assert policy.env(session)["POLICY_CACHE_X"] == "changed"
    monkeypatch.delenv("POLICY_CACHE_X")
    assert "POLICY_CACHE_X" not in policy.env(session)
    assert policy.env({"L": ["unhashable"]}) == policy.env({})  # type: ignore[dict-item]
    for i in range(200):  # bounded: distinct sessions do not grow the cache without end
        assert policy.env({"N": str(i)})["N"] == str(i)
    assert len(policy._env_cache) <= 64


def test_env_memo_key_without_os_environ_internals(monkeypatch: pytest.MonkeyPatch) -> None:
    # The memo key reads os.environ's own dict; without its encoded names (another platform's
    # mapping) it reads os.environ.get: host changes are seen either way.
    for keys_known in (True, False):
        policy = Policy.from_toml('[env]\npass = ["POLICY_CACHE_Y"]\n')
        if not keys_known:
            policy._env_pass_keys = None
        monkeypatch.setenv("POLICY_CACHE_Y", "one")
        assert policy.env({})["POLICY_CACHE_Y"] == "one"
        monkeypatch.setenv("POLICY_CACHE_Y", "two")
        assert policy.env({})["POLICY_CACHE_Y"] == "two"
        monkeypatch.delenv("POLICY_CACHE_Y")
        assert "POLICY_CACHE_Y" not in policy.env({})
