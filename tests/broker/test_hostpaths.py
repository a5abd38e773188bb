"""A workspace may not hold what the broker loads or keeps (``runtime/broker/_hostpaths.py``).

The hole it closes: with the workspace at the user's home, a sandboxed ``write_file`` (as the
broker's own uid on the host) replaced ``~/.cache/runtime/wasm/native/…/_native.so``, and the
next broker ran the library's constructor; a planted ``.cwasm`` under a module's cache key
made ``json_parse`` answer what the call chose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.broker import Broker
from runtime.broker._hostpaths import HostPath, check_workspace, runtime_paths
from runtime.errors import ConfigError
from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[2]


def _refused(workspace: Path, **kwargs: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        Broker(workspace=workspace, **kwargs)  # type: ignore[arg-type]
    return info.value


def test_a_workspace_holding_the_cache_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    (home / ".cache" / "runtime" / "wasm").mkdir(parents=True)
    err = _refused(home, audit=tmp_path / "audit.db")
    assert err.details["reason"] == "trusted_path_in_workspace"
    assert err.details["path"] == str(home / ".cache" / "runtime")
    assert "XDG_CACHE_HOME" in err.message
    # Not made yet counts too: a call could make it, with what it likes in it.
    (home / ".cache" / "runtime" / "wasm").rmdir()
    (home / ".cache" / "runtime").rmdir()
    assert _refused(home, audit=tmp_path / "audit.db").details["path"].endswith("runtime")


def test_the_cache_elsewhere_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    broker = Broker(workspace=tmp_path / "ws", audit=tmp_path / "audit.db")
    broker.audit.close()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "ws" / "cache"))
    assert "cache" in _refused(tmp_path / "ws", audit=tmp_path / "audit.db").message


def test_a_workspace_inside_the_cache_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ws = tmp_path / "cache" / "runtime" / "wasm" / "native"
    ws.mkdir(parents=True)
    err = _refused(ws, audit=tmp_path / "audit.db")
    assert err.details["reason"] == "workspace_in_trusted_path"


def test_the_audit_log_in_the_workspace_is_refused_but_not_in_its_state_dir(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    err = _refused(ws, audit=ws / "logs" / "audit.db")
    assert "the audit log" in err.message and "--audit" in err.message
    assert not (ws / "logs").exists()  # refused before anything was made there
    # The default log is in .runtime, which every call's mounts hide.
    broker = Broker(workspace=ws)
    assert broker.audit.path == ws / ".runtime" / "audit.db"
    broker.audit.close()


def test_the_policy_file_in_the_workspace_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "policy.toml").write_text('version = 1\n[defaults]\naction = "allow"\n')
    err = _refused(ws, policy=ws / "policy.toml", audit=tmp_path / "audit.db")
    assert "the policy file" in err.message


def test_a_sys_path_entry_in_the_workspace_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    monkeypatch.setattr(sys, "path", [*sys.path, str(ws / "lib")])
    err = _refused(ws, audit=tmp_path / "audit.db")
    assert "sys.path" in err.message


def test_pythons_bytecode_cache_in_the_workspace_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With PYTHONPYCACHEPREFIX, every module's .pyc is read from that tree: a call could
    overwrite the runtime's, and the next broker would run it."""
    ws = tmp_path / "ws"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "pycache_prefix", str(ws / "pyc"))
    err = _refused(ws, audit=tmp_path / "audit.db")
    assert "PYTHONPYCACHEPREFIX" in err.message
    assert err.details["reason"] == "trusted_path_in_workspace"
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pyc"))
    (tmp_path / "pyc" / "ws").mkdir(parents=True)
    err = _refused(tmp_path / "pyc" / "ws", audit=tmp_path / "audit.db")
    assert err.details["reason"] == "workspace_in_trusted_path"
    monkeypatch.setattr(sys, "pycache_prefix", None)
    Broker(workspace=ws, audit=tmp_path / "audit.db").audit.close()


def test_a_workspace_inside_the_python_installation_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module, or a ``.pth`` file, made below the standard library, a site-packages
    directory or a venv is imported by the next broker."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    inside = [
        Path(os.__file__).parent / "encodings",  # the standard library
        Path(pytest.__file__).parent,  # a package in site-packages
    ]
    if sys.prefix != sys.base_prefix:
        inside.append(Path(sys.prefix) / "bin" / "sub")  # a venv's (not made yet)
    for ws in inside:
        with pytest.raises(ConfigError) as info:
            check_workspace(ws, runtime_paths(), hidden=".runtime")
        assert info.value.details["reason"] == "workspace_in_trusted_path", ws
        assert "the Python installation" in info.value.message
    if sys.prefix != sys.base_prefix:  # its bin itself: one of the trees, so it holds one
        with pytest.raises(ConfigError) as info:
            check_workspace(Path(sys.prefix) / "bin", runtime_paths(), hidden=".runtime")
        assert "the Python installation" in info.value.message


def test_a_fresh_clone_layout_is_accepted(tmp_path: Path) -> None:
    """The README's main command: ``python3 -m venv .venv && .venv/bin/pip install -e .``
    in a checkout, then ``.venv/bin/runtime exec`` there with the default workspace,
    ``./workspace``. The checkout is on sys.path (the editable install, the current
    directory) and holds the venv; the workspace in it holds neither."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    venv = checkout / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site_packages,) = venv.glob("lib/python3.*/site-packages")
    # What an editable install adds (the checkout), and this run's own code and deps.
    (site_packages / "checkout.pth").write_text(
        "\n".join([str(checkout), str(ROOT), *_site_packages()]) + "\n"
    )
    script = "from runtime.broker import Broker; Broker().audit.close(); print('opened')"
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script],
        capture_output=True,
        text=True,
        env={"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
        cwd=checkout,
        check=False,
        timeout=120,
    )
    assert proc.stdout == "opened\n", proc.stderr
    assert (checkout / "workspace" / ".runtime").is_dir()


def _site_packages() -> list[str]:
    import sysconfig

    return sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})


def test_a_tool_folder_in_the_workspace_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    folder = ws / "tools"
    folder.mkdir(parents=True)
    manifest = {
        "name": "local_echo",
        "description": "Echo.",
        "category": "custom",
        "backend": "subprocess",
        "entry": "tool:run",
        "parameters": {"type": "object", "properties": {}},
    }
    (folder / "local_echo.json").write_text(json.dumps(manifest))
    (folder / "tool.py").write_text("def run(args, ctx):\n    return {}\n")
    err = _refused(ws, tool_folders=[folder], audit=tmp_path / "audit.db")
    assert "tool folder" in err.message


def test_the_workspace_is_judged_by_identity_not_by_name(tmp_path: Path) -> None:
    """The same directory under another name (a symlink here; a bind mount alike)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(ws)
    item = HostPath(ws / "secret.db", "a kept file", "move it", tree=False)
    with pytest.raises(ConfigError):
        check_workspace(alias, [item], hidden=".runtime")
    with pytest.raises(ConfigError):
        check_workspace(ws, [HostPath(alias / "x", "a kept file", "move it")], hidden=".runtime")
    check_workspace(ws, [HostPath(ws / ".runtime" / "x", "kept", "-")], hidden=".runtime")


def test_a_symlink_in_the_workspace_on_the_way_to_a_trusted_path_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interpreter run as ``ws/.venv/bin/python``, ``.venv`` a symlink to a venv
    outside: the venv resolves outside the workspace, but a call may replace the symlink
    (``rm .venv && mkdir -p .venv/bin``) and the next broker, started the same way, runs
    the call's interpreter. Alike a home workspace whose ``~/.cache`` links elsewhere."""
    ws = tmp_path / "ws"
    ws.mkdir()
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (ws / ".venv").symlink_to(venv)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "prefix", str(ws / ".venv"))
    monkeypatch.setattr(sys, "exec_prefix", str(ws / ".venv"))
    err = _refused(ws, audit=tmp_path / "audit.db")
    assert err.details["reason"] == "symlink_to_trusted_path_in_workspace"
    assert err.details["link"] == str(ws / ".venv")
    assert "the Python installation" in err.message
    monkeypatch.undo()

    elsewhere = tmp_path / "big" / "cache"
    elsewhere.mkdir(parents=True)
    (ws / ".cache").symlink_to(elsewhere)
    monkeypatch.setenv("HOME", str(ws))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    err = _refused(ws, audit=tmp_path / "audit.db")
    assert err.details["link"] == str(ws / ".cache")
    assert err.details["path"] == str(ws / ".cache" / "runtime")


def test_only_symlinks_a_call_could_replace_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One outside the workspace, in its hidden state directory, or in a directory the call
    may not write is left alone (a symlink's own mode does not matter: replacing it is
    writing its directory)."""
    from runtime.broker import _hostpaths

    ws = tmp_path / "ws"
    (ws / ".runtime").mkdir(parents=True)
    (ws / "lib").mkdir()
    target = tmp_path / "kept"
    target.mkdir()
    (tmp_path / "outside").symlink_to(target)
    (ws / ".runtime" / "hidden").symlink_to(target)
    (ws / "lib" / "link").symlink_to(target)
    for name in ("outside", "ws/.runtime/hidden"):
        check_workspace(ws, [HostPath(tmp_path / name / "x", "kept", "-")], hidden=".runtime")
    item = HostPath(ws / "lib" / "link" / "x", "kept", "-")
    writable = {ws / "lib" / "link"}
    monkeypatch.setattr(_hostpaths.os, "access", lambda p, mode: Path(p) in writable)
    monkeypatch.setattr(_hostpaths.os, "geteuid", lambda: os.stat(ws).st_uid + 1)
    check_workspace(ws, [item], hidden=".runtime")
    writable = {ws}  # lib/ could be renamed away, and another lib/link made
    with pytest.raises(ConfigError):
        check_workspace(ws, [item], hidden=".runtime")


def test_a_path_the_user_may_not_write_on_the_way_exposes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call writes as the broker's user: where that user may write neither the path nor
    a directory between it and the workspace, neither may a call (a read-only checkout run
    with ``--audit`` elsewhere; ``tests/cli/test_cli_readonly_workspace.py`` runs that as
    an ordinary user). Root may write anything, so ``os.access`` is stood in for here, and
    the files are another user's (an owner may chmod: see the next test)."""
    from runtime.broker import _hostpaths

    ws = tmp_path / "ws"
    (ws / "lib").mkdir(parents=True)
    item = HostPath(ws / "lib" / "m.py", "code", "-", tree=False)
    writable = {ws / "lib"}
    monkeypatch.setattr(_hostpaths.os, "access", lambda p, mode: Path(p) in writable)
    monkeypatch.setattr(_hostpaths.os, "geteuid", lambda: os.stat(ws).st_uid + 1)
    with pytest.raises(ConfigError):  # lib/ may be written: m.py could be made there
        check_workspace(ws, [item], hidden=".runtime")
    writable = {ws}
    with pytest.raises(ConfigError):  # the workspace may be: lib/ could be renamed away
        check_workspace(ws, [item], hidden=".runtime")
    writable = {tmp_path}  # above the workspace: not the call's to write
    check_workspace(ws, [item], hidden=".runtime")


def test_a_read_only_workspace_of_this_users_own_is_the_calls_to_chmod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mode bits that forbid writing do not stop a call that runs as the owner: ``chmod
    u+w`` and write. Only a read-only mount does (chmod fails there too)."""
    from runtime.broker import _hostpaths

    ws = tmp_path / "ws"
    (ws / "lib").mkdir(parents=True)
    item = HostPath(ws / "lib" / "m.py", "code", "-", tree=False)
    monkeypatch.setattr(_hostpaths.os, "access", lambda p, mode: False)  # all of it 0555
    monkeypatch.setattr(_hostpaths.os, "geteuid", lambda: os.stat(ws).st_uid)
    with pytest.raises(ConfigError):
        check_workspace(ws, [item], hidden=".runtime")
    read_only = os.statvfs_result((0,) * 8 + (os.ST_RDONLY, 255))
    monkeypatch.setattr(_hostpaths.os, "statvfs", lambda p: read_only)
    check_workspace(ws, [item], hidden=".runtime")


def test_runtime_exec_says_why_with_exit_64(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".cache" / "runtime").mkdir(parents=True)
    call = tmp_path / "call.json"
    call.write_text(json.dumps({"tool": "json_parse", "arguments": {"text": "[1]"}}))
    proc = subprocess.run(
        [sys.executable, "-m", "runtime", "exec", str(call), "--workspace", str(home)],
        capture_output=True,
        text=True,
        env={
            **{k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"},
            "HOME": str(home),
            "PYTHONPATH": python_path(ROOT),
        },
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 64, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "holds the runtime's cache" in proc.stderr


@pytest.mark.parametrize("enabled", [True, False])
def test_the_users_site_base_in_the_workspace_is_refused_where_python_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    """The user's site-packages is on sys.path only once it exists: a call could make
    ``~/.local/lib/python3.X/site-packages/x.pth``, which the next broker's start-up runs.
    Not made yet, it is judged all the same, when this interpreter reads it."""
    import site

    ws = tmp_path / "home"
    ws.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(site, "ENABLE_USER_SITE", enabled)
    monkeypatch.setattr(site, "USER_BASE", str(ws / ".local"))
    monkeypatch.setattr(site, "USER_SITE", None)  # worked out again (and restored after)
    if enabled:
        err = _refused(ws, audit=tmp_path / "audit.db")
        assert "site-packages" in err.message and err.details["path"] == str(ws / ".local")
    else:
        Broker(workspace=ws, audit=tmp_path / "audit.db").audit.close()


def test_a_path_leaving_a_workspace_directory_by_dotdot_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``XDG_CACHE_HOME=ws/sub/../../cache`` names ``tmp/cache`` today, but a call may turn
    ``sub`` into a symlink (``mv sub x && mkdir -p d1/d2 && ln -s d1/d2 sub``): the same
    string then names ``ws/cache``, and the broker kept its native code there. A component
    not made yet (``ws/missing/../..``) is the call's to make as a link alike."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    for through in ("sub", "missing"):
        monkeypatch.setenv("XDG_CACHE_HOME", f"{ws}/{through}/../../cache")
        err = _refused(ws, audit=tmp_path / "audit.db")
        assert err.details["reason"] == "dotdot_through_workspace"
        assert err.details["passes"] == str(ws / through)
        assert "'..'" in err.message and "XDG_CACHE_HOME" in err.message
    # Leaving the workspace itself, or a directory outside it, is fine: no call may
    # replace either.
    monkeypatch.setenv("XDG_CACHE_HOME", f"{ws}/../cache")
    Broker(workspace=ws, audit=tmp_path / "audit.db").audit.close()
    (tmp_path / "out").mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", f"{tmp_path}/out/../cache")
    Broker(workspace=ws, audit=tmp_path / "audit.db").audit.close()


def test_dotdot_through_a_workspace_not_made_yet_is_refused(tmp_path: Path) -> None:
    """All of a workspace the broker is about to make will be the calls' to write, but not
    the workspace itself."""
    ws = tmp_path / "ws"
    kept = HostPath(Path(f"{ws}/sub/../../kept"), "kept", "-", tree=False)
    with pytest.raises(ConfigError) as info:
        check_workspace(ws, [kept], hidden=".runtime")
    assert info.value.details["reason"] == "dotdot_through_workspace"
    check_workspace(ws, [HostPath(Path(f"{ws}/../kept"), "kept", "-")], hidden=".runtime")
    hidden = HostPath(Path(f"{ws}/.runtime/x/../../../kept"), "kept", "-")
    check_workspace(ws, [hidden], hidden=".runtime")


def test_dotdot_is_judged_in_every_trusted_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PYTHONPYCACHEPREFIX (read unnormalised at every import), ``--audit`` and a tool
    folder are judged by the same walk."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    through = f"{ws}/sub/../.."
    monkeypatch.setattr(sys, "pycache_prefix", f"{through}/pyc")
    err = _refused(ws, audit=tmp_path / "audit.db")
    assert err.details["reason"] == "dotdot_through_workspace"
    assert "PYTHONPYCACHEPREFIX" in err.message
    monkeypatch.setattr(sys, "pycache_prefix", None)
    err = _refused(ws, audit=f"{through}/audit.db")
    assert err.details["reason"] == "dotdot_through_workspace"
    assert "the audit log" in err.message
    folder = tmp_path / "tools"
    folder.mkdir()
    err = _refused(ws, tool_folders=[f"{through}/tools"], audit=tmp_path / "audit.db")
    assert err.details["reason"] == "dotdot_through_workspace"
    assert "tool folder" in err.message


def test_the_users_site_packages_is_a_tree_made_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workspace between the user's base and its site-packages (``~/.local/lib/python3.X``)
    holds the site-packages: a ``write_file`` of ``site-packages/x.pth`` there ran in the next
    Python. One inside it (``.../site-packages/mypkg``) would write what start-up imports.
    Either judged whether the site-packages, or the workspace, is made yet."""
    import site

    base = tmp_path / "home" / ".local"
    user_site = base / "lib" / "python3.X" / "site-packages"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(site, "ENABLE_USER_SITE", True)
    monkeypatch.setattr(site, "USER_BASE", str(base))
    monkeypatch.setattr(site, "USER_SITE", str(user_site))
    err = _refused(user_site.parent, audit=tmp_path / "audit.db")  # neither made
    assert err.details["reason"] == "trusted_path_in_workspace"
    assert err.details["path"] == str(user_site)
    assert "the user's site-packages" in err.message
    # A workspace inside it: neither made, the site-packages made, both made.
    ws = user_site / "mypkg"
    for make in (None, user_site, ws):
        if make is not None:
            make.mkdir(parents=True)
        err = _refused(ws, audit=tmp_path / "audit.db")
        assert err.details["reason"] == "workspace_in_trusted_path", make
        assert err.details["path"] == str(user_site)
    monkeypatch.setattr(site, "ENABLE_USER_SITE", False)
    Broker(workspace=user_site / "mypkg", audit=tmp_path / "audit.db").audit.close()


def test_a_tree_not_made_yet_is_judged_for_a_workspace_inside_it(tmp_path: Path) -> None:
    """By its deepest existing directory and the names below it, whatever name reaches that
    directory (here a symlink to it)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    tree = HostPath(tmp_path / "real" / "a" / "b", "a tree", "-")
    for ws in ("alias/a/b/c", "alias/a/b/c/d"):
        with pytest.raises(ConfigError) as info:
            check_workspace(tmp_path / ws, [tree], hidden=".runtime")
        assert info.value.details["reason"] == "workspace_in_trusted_path"
    for ws in ("alias/a/bb", "alias/b/a/b", "other/a/b"):  # beside it, not inside
        check_workspace(tmp_path / ws, [tree], hidden=".runtime")


def test_a_venv_as_the_project_root_opens_its_workspace(tmp_path: Path) -> None:
    """``python -m venv .`` in the project (or Docker's ``python -m venv /app``), then the
    default ``./workspace`` in it: no call there reaches ``pyvenv.cfg``, ``bin/`` or
    ``lib/``. The venv's own directories stay trees, and the venv itself may not be the
    workspace (it holds them)."""
    project = tmp_path / "app"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project)], check=True)
    (site_packages,) = project.glob("lib/python3.*/site-packages")
    (site_packages / "run.pth").write_text("\n".join([str(ROOT), *_site_packages()]) + "\n")
    script = """if True:
        import json
        from pathlib import Path
        from runtime.broker import Broker
        from runtime.broker._hostpaths import check_workspace, runtime_paths
        from runtime.errors import ConfigError
        Broker().audit.close()
        reasons = {}
        for ws in ("bin/x", "lib/x", "include/x", "lib64/x", "."):
            try:
                check_workspace(Path(ws).resolve(), runtime_paths(), hidden=".runtime")
            except ConfigError as exc:
                reasons[ws] = exc.details["reason"]
        print(json.dumps(reasons))
    """
    proc = subprocess.run(
        [str(project / "bin" / "python"), "-c", script],
        capture_output=True,
        text=True,
        env={"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
        cwd=project,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (project / "workspace" / ".runtime").is_dir()
    assert json.loads(proc.stdout) == {
        "bin/x": "workspace_in_trusted_path",
        "lib/x": "workspace_in_trusted_path",
        "include/x": "workspace_in_trusted_path",
        "lib64/x": "workspace_in_trusted_path",
        ".": "trusted_path_in_workspace",
    }
