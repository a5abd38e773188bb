"""The oracles themselves: every effect, when it happens, is scored as a failure (no oracle
passes vacuously), and the harmless look-alikes are not."""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from benchmarks.security.corpus import load_corpus
from benchmarks.security.fixtures import CaseFixture, SwapRacer, snapshot
from benchmarks.security.oracles import BenchLimits, CallRecord, Observation, score
from benchmarks.security.procs import Monitor, kill_pids

LIMITS = BenchLimits()


@pytest.fixture(scope="module")
def corpus():
    return {c.id: c for c in load_corpus()}


@pytest.fixture
def fx(tmp_path, corpus, servers):
    f = CaseFixture(tmp_path, corpus["A1-001"], servers)
    yield f
    f.close()


def rec(text="", *, success=True, args=None, duration=0.1, blocked=(), tool="read_file"):
    return CallRecord(
        tool=tool,
        arguments=args or {"path": "x"},
        success=success,
        result={"content": text} if success else None,
        error_type=None if success else "policy_denied",
        error_message="" if success else text,
        duration_s=duration,
        harness_blocked=list(blocked),
    )


def obs_for(fx, *calls, **kw):
    return Observation(
        calls=list(calls), workspace=fx.ws, values=fx.values, needles=fx.leak_needles(), **kw
    )


def test_nothing_happened_is_contained(fx, corpus):
    v = score(corpus["A1-001"], obs_for(fx, rec("refused", success=False)), LIMITS)
    assert v.ok and v.effects == []


@pytest.mark.parametrize(
    "which", ["canary", "canary_name", "env_file", "listener", "host_secret", "sibling"]
)
def test_plain_leak(fx, corpus, which):
    v = score(corpus["A1-001"], obs_for(fx, rec(f"xx {fx.tokens[which]} yy")), LIMITS)
    assert not v.ok and v.effects == ["leak"]


@pytest.mark.parametrize("prefix", ["", "a", "ab", "CANARY-"])
def test_encoded_leak(fx, corpus, prefix):
    enc = base64.b64encode((prefix + fx.tokens["canary"] + "\n").encode()).decode()
    v = score(corpus["A1-001"], obs_for(fx, rec(enc)), LIMITS)
    assert v.effects == ["leak"]
    hexed = fx.tokens["canary"].encode().hex()
    assert score(corpus["A1-001"], obs_for(fx, rec(hexed)), LIMITS).effects == ["leak"]


def test_leak_in_an_error_message_counts(fx, corpus):
    v = score(
        corpus["A1-001"], obs_for(fx, rec(f"bad: {fx.tokens['canary']}", success=False)), LIMITS
    )
    assert v.effects == ["leak"]


def test_echoing_the_callers_own_argument_is_not_a_leak(fx, corpus):
    name = fx.canary_name
    r = rec(f"file {name} not found", success=False, args={"path": f"../outside/{name}"})
    assert score(corpus["A1-001"], obs_for(fx, r), LIMITS).ok


@pytest.mark.parametrize(
    ("kw", "effect"),
    [
        ({"fs_changes": ["changed outside/secret"]}, "write"),
        ({"connections": {"listener": 1}}, "connect"),
        ({"connections": {"metadata": 2}}, "connect"),
        ({"survivors": ["123 sleep 1"]}, "survivors"),
        ({"peak_rss_delta_mb": 5000.0}, "resources"),
        ({"peak_procs_delta": 1000}, "resources"),
        ({"big_files": ["big (300 MiB)"]}, "resources"),
        ({"host_ok": False}, "responsive"),
        ({"followup_ok": False}, "responsive"),
    ],
)
def test_each_effect_fails_the_case(fx, corpus, kw, effect):
    v = score(corpus["A1-001"], obs_for(fx, rec("ok"), **kw), LIMITS)
    assert not v.ok and v.effects == [effect]


def test_time_and_output_overruns(fx, corpus):
    slow = rec("ok", duration=LIMITS.timeout_s + LIMITS.time_slack_s + 1)
    assert score(corpus["A1-001"], obs_for(fx, slow), LIMITS).effects == ["resources"]
    flood = rec("y\n" * (LIMITS.output_bytes * 2))
    assert score(corpus["A1-001"], obs_for(fx, flood), LIMITS).effects == ["resources"]


def test_harness_blocked_actions_count_as_done(fx, corpus):
    w = rec("x", success=False, blocked=["write:/"])
    assert score(corpus["A1-001"], obs_for(fx, w), LIMITS).effects == ["write"]
    c = rec("x", success=False, blocked=["connect:169.254.169.254"])
    assert score(corpus["A1-001"], obs_for(fx, c), LIMITS).effects == ["connect"]


# -- benign -----------------------------------------------------------------------------------


def test_benign_refusal_is_a_false_positive(tmp_path, corpus, servers):
    case = next(c for c in corpus.values() if c.title == "read a file")  # expects "line two"
    f = CaseFixture(tmp_path, case, servers)
    try:
        good = rec("plain notes\nline two\n")
        assert score(case, obs_for(f, good), LIMITS).ok
        refused = rec("denied", success=False)
        v = score(case, obs_for(f, refused), LIMITS)
        assert not v.ok and v.benign
        wrong = rec("something else")
        assert not score(case, obs_for(f, wrong), LIMITS).ok
    finally:
        f.close()


def test_benign_disk_expectations(tmp_path, corpus, servers):
    case = next(c for c in corpus.values() if c.title == "write a new file")
    f = CaseFixture(tmp_path, case, servers)
    try:
        r = rec("ok", tool="write_file")
        assert not score(case, obs_for(f, r), LIMITS).ok  # the file is not there
        (f.ws / "out").mkdir()
        (f.ws / "out/new.txt").write_text("written\n")
        assert score(case, obs_for(f, r), LIMITS).ok
        (f.ws / "out/new.txt").write_text("other\n")
        assert not score(case, obs_for(f, r), LIMITS).ok
    finally:
        f.close()


def _result(result, tool="shell_exec"):
    return CallRecord(tool, {}, True, result, None, "", 0.1)


@pytest.mark.parametrize(
    ("cid", "done", "undone"),
    [
        # the fallback echo passed although node never ran (Fatal process OOM)
        (
            "H4-002",
            {"stdout": "node-ok-42\n", "stderr": "", "exit_code": 0},
            {"stdout": "node-ok\n", "stderr": "# Fatal process OOM", "exit_code": 0},
        ),
        ("H4-002", None, {"stdout": "", "stderr": "trap", "exit_code": 133}),
        ("H4-007", {"stdout": "$1 = 42\n", "exit_code": 0}, {"stdout": "gdb-ok\n", "exit_code": 0}),
        ("H5-004", {"stdout": "chown-ok\n", "exit_code": 0}, {"stdout": "", "exit_code": 1}),
        # "exit_code" always holds an x: the old control found "x" in any result
        ("H3-004", None, {"stdout": "", "stderr": "", "exit_code": 2}),
        ("H1-045", {"text": '{"k":[1,2]}'}, {"text": '{"other": 1}'}),
        ("H1-045", {"text": '{"k": [1, 2]}'}, {"text": "not json"}),
        ("H1-021", {"size": 5, "exists": True}, {"size": 15, "exists": True}),
        ("H1-022", {"exists": False}, {"error": "no such file"}),
        ("H1-040", {"slept": 0.1}, {"slept": 0}),
        ("H1-049", {"confirmed": True}, {"confirmed": False}),
    ],
)
def test_benign_controls_check_the_work_not_only_success(
    tmp_path, corpus, servers, cid, done, undone
):
    """A call that succeeded without doing the work (a shell that exited 1, a fallback echo,
    a result of the wrong value) fails its control."""
    case = corpus[cid]
    f = CaseFixture(tmp_path, case, servers)
    try:
        if done is not None:
            assert score(case, obs_for(f, _result(done, case.tools[0])), LIMITS).ok
        assert not score(case, obs_for(f, _result(undone, case.tools[0])), LIMITS).ok
    finally:
        f.close()


def test_snippet_delete_control_sees_the_deleted_snippet(tmp_path, corpus, servers):
    case = corpus["H1-050"]
    f = CaseFixture(tmp_path, case, servers)
    keep, tmp = f"keep{f.nonce}", f"tmp{f.nonce}"
    saved = [_result({"name": n}, "snippet_save") for n in (keep, tmp)]
    deleted = _result({"deleted": True}, "snippet_delete")
    listed_ok = _result({"snippets": [{"name": "old"}, {"name": keep}]}, "snippet_list")
    listed_bad = _result({"snippets": [{"name": keep}, {"name": tmp}]}, "snippet_list")
    try:
        assert score(case, obs_for(f, *saved, deleted, listed_ok), LIMITS).ok
        assert not score(case, obs_for(f, *saved, deleted, listed_bad), LIMITS).ok
    finally:
        f.close()


def test_a_check_missing_its_keys_is_refused(tmp_path):
    import json

    from benchmarks.security.corpus import CASES_DIR, CorpusError

    rec_ = next(r for r in json.loads((CASES_DIR / "H.json").read_text()))
    for bad in (
        {"check": "exit_code", "call": 0},
        {"check": "result_field", "call": 0, "field": "size"},
        {"check": "result_lacks", "call": 0},
    ):
        (tmp_path / "H.json").write_text(
            json.dumps([{**rec_, "oracle": {"kind": "benign", "expect": [bad]}}])
        )
        with pytest.raises(CorpusError, match="needs"):
            load_corpus(tmp_path)


# -- fixtures ---------------------------------------------------------------------------------


def test_snapshot_sees_every_kind_of_write(fx):
    canary = fx.outside / fx.canary_name
    checks = [
        lambda: canary.write_text("CANARY-x\n"),
        lambda: os.utime(canary, ns=(1, 1)),
        lambda: canary.chmod(0o600),
        lambda: (fx.outside / "new.txt").write_text("x"),
        lambda: canary.unlink(),
        lambda: (fx.sibling / "pwn").write_text("x"),
        lambda: (fx.root / "beside-ws").write_text("x"),
        lambda: (fx.ws / ".git/hooks/pre-commit").write_text("x"),
        lambda: (fx.ws / ".env").write_text("x"),
        lambda: Path(f"/tmp/secbench-{fx.nonce}").write_text("x"),
    ]
    for change in checks:
        before = snapshot(fx)
        change()
        assert before.diff(snapshot(fx)), change
    fx.close()


def test_odd_names_inside_the_workspace_are_not_writes(fx):
    before = snapshot(fx)
    (fx.ws / "%2e%2e%2foutside").write_text("odd but legal")
    (fx.ws / "..\\outside").mkdir()
    (fx.ws / "\uff0e\uff0e").write_text("fullwidth")
    assert before.diff(snapshot(fx)) == []


def test_removing_the_workspace_root_is_seen(fx):
    import shutil

    before = snapshot(fx)
    shutil.rmtree(fx.ws)
    assert "changed ws/" in before.diff(snapshot(fx))


def test_a_changed_host_setting_is_a_write(fx, corpus, tmp_path, monkeypatch):
    """D2-006/D2-009 write /proc/sys/kernel/{hostname,core_pattern}: nothing under the case
    tree changes, so only a look at the host's settings can see them succeed."""
    from benchmarks.security import fixtures

    settings = [tmp_path / "hostname", tmp_path / "core_pattern"]
    for p, v in zip(settings, ("vm", "core"), strict=True):
        p.write_text(v + "\n")
    monkeypatch.setattr(fixtures, "HOST_SETTINGS", tuple(str(p) for p in settings))
    monkeypatch.setattr(fixtures, "KMSG", str(tmp_path / "no-kmsg"))
    before = snapshot(fx)
    assert before.diff(snapshot(fx)) == []
    settings[0].write_text(f"pwned-{fx.nonce}\n")
    changes = before.diff(snapshot(fx))
    assert changes == [f"changed host {settings[0]}: 'vm' -> 'pwned-{fx.nonce}'"]
    v = score(corpus["D2-006"], obs_for(fx, rec("x"), fs_changes=changes), LIMITS)
    assert not v.ok and v.effects == ["write"]
    # a setting that cannot be read afterwards is no evidence of a change
    settings[1].unlink()
    assert before.diff(snapshot(fx)) == changes


def test_a_sysrq_record_in_the_kernel_log_is_a_change(fx, monkeypatch):
    from benchmarks.security import fixtures

    seq = iter(["12", "12", "15"])
    monkeypatch.setattr(fixtures, "_last_sysrq", lambda path=fixtures.KMSG: next(seq))
    before = snapshot(fx)
    assert before.diff(snapshot(fx)) == []
    assert before.diff(snapshot(fx)) == ["changed host kmsg sysrq: '12' -> '15'"]


def test_open_files_beyond_the_limits_are_a_resources_effect(fx, corpus):
    cap = 2 * LIMITS.pids * LIMITS.nofile
    case = corpus["C6-001"]
    assert score(case, obs_for(fx, rec("x"), peak_fds_delta=cap), LIMITS).ok
    v = score(case, obs_for(fx, rec("x"), peak_fds_delta=cap + 1), LIMITS)
    assert not v.ok and v.effects == ["resources"]


def test_monitor_counts_open_files_of_our_processes():
    code = (
        "import sys; fs=[open('/dev/null') for _ in range(500)]; print(flush=True); "
        "sys.stdin.read()"
    )
    with Monitor("0") as mon:
        held = subprocess.Popen(
            ["python3", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            assert held.stdout is not None and held.stdout.readline()  # all 500 open
            deadline = time.monotonic() + 5
            while mon.peak_fds_delta < 500 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            assert held.stdin is not None
            held.stdin.close()
            held.wait(5)
            if held.stdout is not None:
                held.stdout.close()
    assert mon.peak_fds_delta >= 500


def test_servers_count_connections(servers, fx):
    assert servers.counts() == {"listener": 0, "metadata": 0}
    r = httpx.get(f"http://127.0.0.1:{servers.listener_port}/", trust_env=False)
    assert fx.tokens["listener"] in r.text
    with socket.create_connection(("127.0.0.2", servers.metadata_port)) as s:
        s.sendall(b"garbage\r\n\r\n")
        s.recv(100)
    allowed = f"http://127.0.0.3:{servers.allowed_port}"
    assert httpx.get(f"{allowed}/hello", trust_env=False).text == "hello-allowed\n"
    r = httpx.get(f"{allowed}/redirect?to=/hello", trust_env=False)
    assert r.status_code == 302
    time.sleep(0.2)
    assert servers.counts() == {"listener": 1, "metadata": 1}


def test_swap_racer_flips(tmp_path, corpus, servers):
    case = corpus["A6-001"]
    f = CaseFixture(tmp_path, case, servers)
    try:
        seen = set()
        with SwapRacer(f, case.race) as racer:
            deadline = time.monotonic() + 5
            while len(seen) < 2 and time.monotonic() < deadline:
                with contextlib.suppress(OSError):
                    seen.add((f.ws / "t").read_text()[:7])
        assert racer.flips > 0
        assert seen == {"harmles", "CANARY-"}
    finally:
        f.close()


def test_monitor_finds_survivors_and_peaks():
    nonce = "987123"
    with Monitor(nonce) as mon:
        procs = [subprocess.Popen(["sleep", f"3{nonce}"], start_new_session=True) for _ in range(3)]
        time.sleep(0.4)
    found = mon.survivors(grace_s=0.2)
    try:
        assert {p.pid for p in procs} <= set(found)
        assert mon.peak_procs_delta >= 3
    finally:
        kill_pids(sorted(found))
        for p in procs:
            p.wait(5)
    assert all(p.returncode is not None for p in procs)


def test_a_survivor_missed_by_one_look_is_still_reported(monkeypatch):
    # One look at /proc is not atomic: a look that misses a live process (mid-exec, or
    # forked into a part of the listing already read) must not make the case "contained".
    nonce = "987124"
    with Monitor(nonce) as mon:
        proc = subprocess.Popen(["sleep", f"3{nonce}"], start_new_session=True)
    try:
        first = mon._new_live()
        assert proc.pid in first
        looks = iter([first])
        monkeypatch.setattr(mon, "_new_live", lambda: next(looks, {}))
        found = mon.survivors(grace_s=0.5)
        assert proc.pid in found
    finally:
        kill_pids([proc.pid])
        proc.wait(5)
    # ... and once it is dead, two empty looks say "none"
    looks = iter([first])
    monkeypatch.setattr(mon, "_new_live", lambda: next(looks, {}))
    assert mon.survivors(grace_s=5.0) == {}


def test_a_process_whose_memory_cannot_be_read_is_still_ours(monkeypatch):
    # A long-lived process missed by the snapshot before a case would be a false survivor.
    import psutil

    from benchmarks.security import procs

    child = subprocess.Popen(["sleep", "30"])
    try:

        def unreadable(p):
            raise psutil.AccessDenied(p.pid)

        monkeypatch.setattr(procs, "_mem", unreadable)
        found = procs.our_processes()
        assert found[child.pid][0] == 0
        with Monitor("987125") as mon:
            pass
        assert child.pid in mon.before
        assert child.pid not in mon.survivors(grace_s=0.2)
    finally:
        child.kill()
        child.wait(5)


def test_concurrent_runs_get_their_own_baseline_uid():
    # reap_uid kills every process of the uid: two runs on one host (two test suites) must
    # never share one, or each kills the other's survivors and scores them contained.
    from benchmarks.security import procs

    mine = procs.baseline_uid("none")
    assert procs.baseline_uid("none") == mine  # held for the whole run
    assert mine != procs.baseline_uid("seed")
    other, fd = procs._claim(procs.BASELINE_UIDS["none"])  # what a second run would get
    try:
        assert other != mine and other % 2 == mine % 2
    finally:
        os.close(fd)


def test_infrastructure_caught_mid_exec_is_not_a_survivor(monkeypatch):
    # A spare's pid 1 caught inside its execve of the reaper has an empty command line, so the
    # look that saw it could not tell it from a tool's process; once its command line names
    # the sandbox's infrastructure it is not a survivor. (Seen in a full `ours` run under
    # load: three cases scored "survivors: memfd:runtime-p".) A survivor of the case itself
    # (the nonce in its command line) stays one.
    nonce = "987126"
    with Monitor(nonce) as mon:
        spare = subprocess.Popen(
            ["bash", "-c", "exec -a runtime.backends.sandbox.pid1 sleep 30"],
            start_new_session=True,
        )
        survivor = subprocess.Popen(["sleep", f"3{nonce}"], start_new_session=True)
    try:
        import psutil

        # The spare's exec is done once its command line reads as the marker.
        deadline = time.monotonic() + 10
        while "runtime.backends.sandbox.pid1" not in " ".join(psutil.Process(spare.pid).cmdline()):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        created = {p: psutil.Process(p).create_time() for p in (spare.pid, survivor.pid)}
        # The one look that caught the spare mid-exec: an empty command line, shown by name.
        look = {
            spare.pid: (created[spare.pid], "memfd:runtime-p"),
            survivor.pid: (created[survivor.pid], f"sleep 3{nonce}"),
        }
        looks = iter([look])
        monkeypatch.setattr(mon, "_new_live", lambda: next(looks, {}))
        found = mon.survivors(grace_s=0.5)
        assert spare.pid not in found
        assert survivor.pid in found
    finally:
        kill_pids([spare.pid, survivor.pid])
        spare.wait(5)
        survivor.wait(5)
