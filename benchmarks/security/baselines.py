"""The two baselines: what agent frameworks do today (``seed``) and nothing at all (``none``).

``seed`` implements, faithfully, the validators the seed documents describe
(``/work/shared/seeds``):

- paths (seed 001 ``validatePath`` / ``PathValidator``): ``path.resolve(workspace, p)`` (a
  lexical join + normalise; symlinks are not looked at) then ``startsWith(resolve(workspace))``
  (a string prefix, so ``/ws-evil`` passes for ``/ws``); the check runs, then the file is
  opened by name (check-then-use);
- commands: the dangerous-pattern regexes of seed 001 and seed 004 ``DANGEROUS_PATTERNS``,
  the blocking-service substrings of seed 003, then ``exec`` through a shell with a timeout
  (seed 001: 30 s default, ``maxBuffer`` 10 MB; seed 004: output cut at 10,000 chars) and a
  working directory checked like a path (seed 004 ``restrict_to_workspace``);
- network: none of the seeds checks URLs; the HTTP tools just fetch, following redirects.

``none`` runs the same tools with no check at all (``os.path.join`` that drops the base for an
absolute path, a shell without a timeout).

This file is also the worker: the runner starts ``python baselines.py`` as an unprivileged uid
of its own, with rlimits that protect the shared host, in a throwaway tree, one process per
call (JSON in on stdin, JSON out on stdout). A *harness guard* refuses what must never happen
on a shared machine (a destructive file operation outside the case's throwaway root, a
connection to anything but loopback); it records the attempt, and the oracles score it as the
effect it would have had. The guard is harness safety, not a baseline defence.
"""

from __future__ import annotations

import base64
import datetime as dt
import errno
import fnmatch
import hashlib
import importlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = ["SEED_DANGEROUS", "run_tool", "seed_check_command", "seed_resolve"]

#: seed 001 ``validateCommand`` + seed 004 ``DANGEROUS_PATTERNS`` (as written there).
SEED_DANGEROUS = [
    r"rm\s+-rf\s+\/",
    r":\(\)\{.*\}",
    r"mkfs",
    r"dd\s+if=",
    r"rm\s+-rf\s+/",
    r"mkfs\.",
    r":\(\)\{ :\|:& \};:",
    r">\s*/dev/sd",
]
#: seed 003 ``is_blocking_service_command`` (substring match).
SEED_BLOCKING = [
    "http.server",
    "npm run dev",
    "npm start",
    "uvicorn",
    "gunicorn",
    "cargo run",
    "vite",
    "next dev",
    "webpack-dev-server",
]
SEED_MAX_BUFFER = 10 * 1024 * 1024
SEED_MAX_OUTPUT_CHARS = 10_000


class Refused(Exception):
    """A baseline check refused the call (the seed's SecurityError)."""


class Blocked(Exception):
    """The harness guard stopped an action; recorded and scored as if it had happened."""


class Ctx:
    def __init__(self, req: dict[str, Any]) -> None:
        self.mode: str = req["mode"]
        self.ws = req["workspace"]
        self.case_root = req["case_root"]
        self.timeout_s: float = req["timeout_s"]
        self.state = Path(req["state_file"])
        self.blocked: list[str] = []
        #: Running inside a sandbox under test (``--backend bwrap``, ``--wrap``): the guard
        #: leaves to the kernel what the sandbox's mounts refuse (see ``_guard_write``).
        self.sandboxed: bool = bool(req.get("sandboxed", False))

    def load_state(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.state.read_text()))
        except (OSError, ValueError):
            return {"env": {}, "snippets": {}, "memory": {}}

    def save_state(self, data: dict[str, Any]) -> None:
        self.state.write_text(json.dumps(data))


# ------------------------------------------------------------------------------------------
# seed validators


def seed_resolve(ws: str, p: str) -> str:
    """Seed 001: ``path.resolve(ws, p)`` then ``startsWith(path.resolve(ws))``."""
    absolute = os.path.normpath(os.path.join(os.path.normpath(ws), p))
    if not absolute.startswith(os.path.normpath(ws)):
        raise Refused("Path is outside workspace directory")
    return absolute


def seed_check_command(command: str) -> None:
    for pattern in SEED_DANGEROUS:
        if re.search(pattern, command):
            raise Refused("Dangerous command detected and blocked")
    for pattern in SEED_BLOCKING:
        if pattern in command:
            raise Refused(f"blocking service command refused: {pattern}")


def _path(ctx: Ctx, p: str) -> str:
    if ctx.mode == "seed":
        return seed_resolve(ctx.ws, p)
    return os.path.join(ctx.ws, p)  # drops the base for an absolute p, as os.path.join does


def _guard_write(ctx: Ctx, target: str, *, recursive: bool = False) -> None:
    real = os.path.realpath(target)
    root = os.path.realpath(ctx.case_root)
    if not (real == root or real.startswith(root + os.sep)):
        if ctx.sandboxed and not recursive and _read_only_mount(real):
            # Inside a sandbox under test, a write whose target (or, for a new path, the
            # nearest directory that exists) lies on a read-only mount is refused by the
            # kernel whatever the process's privileges (EROFS): the sandbox contains it, so
            # it runs and fails instead of being scored as done. A recursive delete stays
            # guarded: a writable mount may lie below a read-only one.
            return
        ctx.blocked.append(f"write:{real}")
        raise Blocked(f"harness guard: write outside the throwaway root ({real})")
    if real == root:
        ctx.blocked.append(f"write:{real}")
        raise Blocked("harness guard: the throwaway root itself")


def _read_only_mount(path: str) -> bool:
    """Whether a write at ``path`` lands on a read-only mount, as this process sees it."""
    probe = path
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return False
        probe = parent
    try:
        return bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _guard_url(ctx: Ctx, url: str) -> None:
    host = urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return  # it will fail on its own
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        mapped = getattr(addr, "ipv4_mapped", None)
        loopback = addr.is_loopback or (mapped is not None and mapped.is_loopback)
        if not loopback and str(addr) != "0.0.0.0":
            if ctx.sandboxed and not _routable(addr):
                # Inside a sandbox under test with no route there (bwrap's empty network
                # namespace), the connection fails on its own: the sandbox contains it. It
                # was scored as made (bwrap: E1-024, E1-036..039, E2-008/009).
                return
            ctx.blocked.append(f"connect:{addr}")
            raise Blocked(f"harness guard: no traffic beyond loopback ({addr})")


def _routable(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether this process has a route to ``addr``: a UDP connect looks the route up and
    sends nothing (ENETUNREACH in a network namespace without one)."""
    family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((str(addr), 9))
    except OSError:
        return False
    return True


# ------------------------------------------------------------------------------------------
# tools


def _read_file(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    p = _path(ctx, a["path"])
    with open(p, "rb") as f:
        data = f.read()
    if a.get("encoding") == "base64":
        return {"content": base64.b64encode(data).decode(), "size": len(data)}
    text = data.decode("utf-8", "replace")
    lines = text.splitlines(keepends=True)
    off = max(int(a.get("offset", 1)), 1) - 1
    lim = int(a.get("limit", 2000))
    return {"content": "".join(lines[off : off + lim]), "size": len(data), "lines": len(lines)}


def _write_file(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    p = _path(ctx, a["path"])
    _guard_write(ctx, p)
    data = a["content"].encode()
    if a.get("encoding") == "base64":
        data = base64.b64decode(a["content"])
    os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
    with open(p, "ab" if a.get("mode") == "append" else "wb") as f:
        f.write(data)
    return {"bytes_written": len(data)}


def _edit_file(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    p = _path(ctx, a["path"])
    _guard_write(ctx, p)
    with open(p, encoding="utf-8") as f:
        text = f.read()
    n = text.count(a["old_string"])
    if n == 0 or (n > 1 and not a.get("replace_all")):
        raise Refused(f"old_string found {n} times")
    text = text.replace(a["old_string"], a["new_string"], -1 if a.get("replace_all") else 1)
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)
    return {"replacements": n if a.get("replace_all") else 1}


def _list_files(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    base = _path(ctx, a.get("path", "."))
    out = []
    pattern = a.get("pattern")
    if a.get("recursive"):
        # fs.readdir + fs.stat in the seed: follows symlinks.
        for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
            for n in dirnames + filenames:
                if not pattern or fnmatch.fnmatch(n, pattern):
                    out.append({"name": n, "path": os.path.join(dirpath, n)})
    else:
        for n in os.listdir(base):
            if not pattern or fnmatch.fnmatch(n, pattern):
                out.append({"name": n, "path": os.path.join(base, n)})
    return {"files": out}


def _delete_file(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    p = _path(ctx, a["path"])
    if ctx.sandboxed and not os.path.lexists(p):
        # Not there in the sandbox's view: nothing can be deleted (as os.remove would say).
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), p)
    _guard_write(ctx, p, recursive=bool(a.get("recursive")))
    if os.path.isdir(p) and not os.path.islink(p):
        if not a.get("recursive"):
            raise Refused("directory needs recursive")
        shutil.rmtree(p)
    else:
        os.remove(p)
    return {"deleted": True}


def _move_file(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    src, dst = _path(ctx, a["source"]), _path(ctx, a["destination"])
    _guard_write(ctx, src)
    _guard_write(ctx, dst)
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    shutil.move(src, dst)
    return {"moved": True}


def _get_file_info(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    p = _path(ctx, a["path"])
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return {"exists": False}
    return {"exists": True, "size": st.st_size, "mode": oct(st.st_mode)}


def _file_search(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    base = _path(ctx, a.get("path", "."))
    matches = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
        for n in dirnames + filenames:
            if fnmatch.fnmatch(n, a["pattern"]):
                matches.append(os.path.join(dirpath, n))
        if len(matches) >= int(a.get("limit", 20)):
            break
    return {"matches": matches[: int(a.get("limit", 20))]}


def _code_query(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    base = _path(ctx, a.get("path", "."))
    files = (
        [base]
        if not os.path.isdir(base)
        else [os.path.join(d, n) for d, _, ns in os.walk(base, followlinks=True) for n in ns]
    )
    matches = []
    for fpath in files:
        try:
            with open(fpath, encoding="utf-8", errors="replace") as f:
                for i, line in enumerate(f, 1):
                    if a["query"] in line:
                        matches.append({"file": fpath, "line": i, "code": line.rstrip()})
        except OSError:
            continue
    return {"matches": matches[:50], "engine": "grep"}


def _shell_exec(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    command = a["command"]
    cwd = _path(ctx, a["cwd"]) if a.get("cwd") else ctx.ws
    if ctx.mode == "seed":
        seed_check_command(command)
    env = dict(os.environ)  # seeds: exec inherits process.env
    env.update(ctx.load_state()["env"])
    env.update(a.get("env") or {})
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    timeout = ctx.timeout_s if ctx.mode == "seed" else None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # node's exec: kill the shell only, then wait for the pipes to close.
        proc.kill()
        out, err = proc.communicate()
        raise Refused(f"Command timed out after {timeout}s") from None
    if ctx.mode == "seed":
        if len(out) > SEED_MAX_BUFFER or len(err) > SEED_MAX_BUFFER:
            raise Refused("stdout maxBuffer length exceeded")
        out, err = out[:SEED_MAX_OUTPUT_CHARS], err[:SEED_MAX_OUTPUT_CHARS]
    return {
        "stdout": out.decode("utf-8", "replace"),
        "stderr": err.decode("utf-8", "replace"),
        "exit_code": proc.returncode,
    }


def _http(ctx: Ctx, method: str, a: dict[str, Any], as_text: bool = False) -> dict[str, Any]:
    import httpx

    def hook(request: httpx.Request) -> None:
        _guard_url(ctx, str(request.url))

    _guard_url(ctx, a["url"])
    with httpx.Client(
        follow_redirects=True, timeout=5, event_hooks={"request": [hook]}, trust_env=False
    ) as client:
        r = client.request(
            method, a["url"].strip(), headers=a.get("headers"), content=a.get("body")
        )
    body = r.text
    if as_text:
        body = re.sub(r"<[^>]+>", " ", body)
        return {"url": str(r.url), "status": r.status_code, "content": body}
    return {"status": r.status_code, "headers": dict(r.headers), "body": body}


def _web_fetch(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    """CountBot's web_fetch: ``url`` or ``urls``; in batch mode each page or its error."""
    if "urls" not in a:
        return _http(ctx, "GET", a, as_text=True)
    pages: list[dict[str, Any]] = []
    for url in ([a["url"]] if "url" in a else []) + list(a["urls"]):
        try:
            pages.append(_http(ctx, "GET", {"url": url}, as_text=True))
        except Exception as exc:
            pages.append({"url": url, "error": str(exc)})
    return {"pages": pages, "count": len(pages)}


def _web_search(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    import httpx

    url = f"http://127.0.0.3:{os.environ['SECBENCH_ALLOWED_PORT']}/search"
    r = httpx.get(url, params={"q": a["query"], "format": "json"}, timeout=5, trust_env=False)
    return {
        "results": [
            {"title": x["title"], "url": x["url"], "snippet": x["content"]}
            for x in r.json()["results"]
        ][: int(a.get("limit", 5))]
    }


def _set_env(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    state = ctx.load_state()
    prev = state["env"].get(a["key"])
    state["env"][a["key"]] = a["value"]
    ctx.save_state(state)
    return {"previous": prev}


def _get_env(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    env = ctx.load_state()["env"]
    return {"value": env.get(a["key"]), "exists": a["key"] in env}


def _snippet_save(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    state = ctx.load_state()
    state["snippets"][a["name"]] = dict(a)
    ctx.save_state(state)
    return {"id": a["name"], "name": a["name"]}


def _snippet_list(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    snippets = [
        s
        for s in ctx.load_state()["snippets"].values()
        if not a.get("tags") or set(a["tags"]) & set(s.get("tags", []))
    ]
    return {"count": len(snippets), "snippets": snippets}


def _snippet_delete(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    state = ctx.load_state()
    deleted = state["snippets"].pop(a["name"], None) is not None
    ctx.save_state(state)
    return {"deleted": deleted}


def _memory_write(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    state = ctx.load_state()
    key = a.get("key") or f"m{len(state.setdefault('memory', {}))}"
    state.setdefault("memory", {})[key] = {"key": key, **a}
    ctx.save_state(state)
    return {"id": key, "key": key}


def _memory_search(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    words = a.get("query", "").split()
    found = [
        m
        for m in ctx.load_state().get("memory", {}).values()
        if all(w in m["content"] for w in words)
    ]
    return {"count": len(found), "matches": found}


def _memory_delete(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    state = ctx.load_state()
    deleted = state.get("memory", {}).pop(a["key"], None) is not None
    ctx.save_state(state)
    return {"deleted": deleted}


def _json_query(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    value = a["data"]
    for tok in [t for t in a["pointer"].split("/")[1:]]:
        tok = tok.replace("~1", "/").replace("~0", "~")
        try:
            value = value[int(tok)] if isinstance(value, list) else value[tok]
        except (KeyError, IndexError, ValueError, TypeError):
            return {"found": False, "value": None}
    return {"found": True, "value": value}


def _regex_match(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    m = re.search(a["pattern"], a["text"])
    if m is None:
        return {"matched": False, "match": None, "start": None, "end": None}
    return {"matched": True, "match": m.group(0), "start": m.start(), "end": m.end()}


def _csv_to_json(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    import csv
    import io

    rows = list(csv.reader(io.StringIO(a["text"]), delimiter=a.get("delimiter", ",")))
    if a.get("header", True) and rows:
        cols = rows[0]
        return {"columns": cols, "rows": [dict(zip(cols, r, strict=False)) for r in rows[1:]]}
    return {"columns": [], "rows": rows}


def _sleep(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    time.sleep(float(a["seconds"]))  # no bound: the seeds' sleep has none
    return {"slept": a["seconds"]}


TOOLS: dict[str, Any] = {
    "read_file": _read_file,
    "write_file": _write_file,
    "edit_file": _edit_file,
    "list_files": _list_files,
    "delete_file": _delete_file,
    "move_file": _move_file,
    "get_file_info": _get_file_info,
    "file_search": _file_search,
    "code_query": _code_query,
    "shell_exec": _shell_exec,
    "http_get": lambda c, a: _http(c, "GET", a),
    "http_post": lambda c, a: _http(c, "POST", a),
    "http_request": lambda c, a: _http(c, a.get("method", "GET"), a),
    "web_fetch": _web_fetch,
    "web_search": _web_search,
    "current_time": lambda c, a: {
        "timestamp": time.time(),
        "iso": dt.datetime.now(dt.UTC).isoformat(),
        "timezone": a.get("timezone", "UTC"),
    },
    "sleep": _sleep,
    "get_env": _get_env,
    "set_env": _set_env,
    "json_parse": lambda c, a: {"value": json.loads(a["text"])},
    "json_stringify": lambda c, a: {
        "text": json.dumps(a["data"], indent=2 if a.get("pretty") else None)
    },
    "json_query": _json_query,
    "base64_encode": lambda c, a: {"encoded": base64.b64encode(a["text"].encode()).decode()},
    "base64_decode": lambda c, a: {"text": base64.b64decode(a["encoded"]).decode()},
    "hash": lambda c, a: {
        "algorithm": a.get("algorithm", "sha256"),
        "hex": hashlib.new(a.get("algorithm", "sha256"), a["text"].encode()).hexdigest(),
    },
    "regex_match": _regex_match,
    "csv_to_json": _csv_to_json,
    "snippet_save": _snippet_save,
    "snippet_load": lambda c, a: c.load_state()["snippets"][a["name"]],
    "snippet_list": _snippet_list,
    "snippet_delete": _snippet_delete,
    "memory_write": _memory_write,
    "memory_read": lambda c, a: c.load_state()["memory"][a["key"]],
    "memory_search": _memory_search,
    "memory_delete": _memory_delete,
    "request_confirmation": lambda c, a: {"confirmed": True, "answer": "yes"},
    "ask_user": lambda c, a: {"answer": (a.get("options") or ["yes"])[0]},
    "review_with_feedback_content": lambda c, a: {
        "action": "feedback",
        "content": a["content"],
        "feedback": "yes",
    },
}


def run_tool(req: dict[str, Any]) -> dict[str, Any]:
    ctx = Ctx(req)
    fn = TOOLS.get(req["tool"])
    try:
        if fn is None:
            raise Refused(f"unknown tool {req['tool']}")
        result = fn(ctx, req["arguments"])
        out: dict[str, Any] = {"success": True, "result": result, "error": None}
    except Refused as exc:
        out = {
            "success": False,
            "result": None,
            "error": {"type": "policy_denied", "message": str(exc)},
        }
    except Blocked as exc:
        out = {
            "success": False,
            "result": None,
            "error": {"type": "harness_blocked", "message": str(exc)},
        }
    except RecursionError as exc:
        out = {
            "success": False,
            "result": None,
            "error": {"type": "tool_error", "message": f"RecursionError: {exc}"},
        }
    except Exception as exc:
        out = {
            "success": False,
            "result": None,
            "error": {"type": "tool_error", "message": f"{type(exc).__name__}: {exc}"},
        }
    out["harness_blocked"] = ctx.blocked
    return out


def _unimportable(modules: list[str]) -> list[str]:
    """Which of ``modules`` this interpreter cannot import, and why."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(f"{name} ({type(exc).__name__}: {exc})")
    return missing


def main() -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.setrecursionlimit(10_000)
    req = json.loads(sys.stdin.buffer.read())
    os.chdir(req["workspace"])
    # The harness's: where to find the packages the tools import lazily (httpx) when the
    # interpreter the sandbox can run has none (appended: never in front of the stdlib),
    # and, in its start-up probe, the modules that must import before any call is scored.
    sys.path.extend(str(p) for p in req.get("sys_path", []))
    missing = _unimportable(list(req.get("require", [])))
    if missing:
        out = {
            "success": False,
            "result": None,
            "error": {"type": "harness_error", "message": "cannot import " + "; ".join(missing)},
            "harness_blocked": [],
        }
    else:
        out = run_tool(req)
    sys.stdout.write(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
