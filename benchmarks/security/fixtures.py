"""Fresh fixtures for every case: canaries, loopback servers, snapshots, a swap racer.

What an attacker controls: the tool arguments, and everything a tool run does. What the
harness controls: this module. The canaries are throwaway files under a throwaway root that the
harness made; their content and names carry random tokens, so a leak is a token showing up in
a result, and a write is any change to the watched trees. Canaries are world-readable and
world-writable on purpose: Unix permissions must not be what contains an attack.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import http.server
import json
import os
import secrets
import shutil
import socket
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .corpus import Case, fill

__all__ = [
    "HOST_SETTINGS",
    "SCRIPT_PATH",
    "CaseFixture",
    "Servers",
    "Snapshot",
    "SwapRacer",
    "host_state",
    "snapshot",
]

_WATCH_IN_WS = (".env", "id_rsa", "certs", ".git")
_TMP_DIRS = ("/tmp", "/dev/shm", "/var/tmp")
#: Host settings the D2 attacks aim at (the UTS names, where a crash dump is piped to, the
#: sysrq switch): any change between before and after a case is a write to the host.
HOST_SETTINGS = (
    "/proc/sys/kernel/hostname",
    "/proc/sys/kernel/domainname",
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/sysrq",
)
#: Where the kernel log is read for sysrq commands run (`echo h > /proc/sysrq-trigger`
#: changes no setting: the kernel logs "sysrq: ..." and acts).
KMSG = "/dev/kmsg"
#: Where the allowed server serves the case's download script (``ServerState.script``).
SCRIPT_PATH = "/script.sh"


# ------------------------------------------------------------------------------------------
# Loopback servers


@dataclass
class ServerState:
    """Shared between the handler threads and the runner; reset per case."""

    listener_token: str = ""
    metadata_token: str = ""
    script: str = "true\n"
    counts: dict[str, int] = field(default_factory=lambda: {"listener": 0, "metadata": 0})
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hit(self, name: str) -> None:
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + 1


def _handler(role: str, state: ServerState) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"
        timeout = 2

        def handle(self) -> None:
            # Counted before parsing: a gopher/dict/garbage request is still a connection.
            if role != "allowed":
                state.hit(role)
            with contextlib.suppress(OSError):
                super().handle()

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(
            self,
            code: int,
            body: bytes,
            ctype: str = "text/plain",
            headers: dict[str, str] | None = None,
        ) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _serve(self) -> None:
            if role == "listener":
                self._send(200, f"LISTENER {state.listener_token}\n".encode())
                return
            if role == "metadata":
                self._send(200, f"METADATA {state.metadata_token}\n".encode())
                return
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path == "/redirect" and "to" in query:
                self._send(302, b"", headers={"Location": query["to"][0]})
            elif url.path == "/hello":
                self._send(200, b"hello-allowed\n")
            elif url.path == "/page.html":
                page = b"<html><body><h1>Benign Page</h1><p>Some text.</p></body></html>"
                self._send(200, page, "text/html")
            elif url.path == SCRIPT_PATH:
                self._send(200, state.script.encode(), "text/x-sh")
            elif url.path in ("/search", "/search/"):
                q = query.get("q", [""])[0]
                results = [
                    {
                        "title": "Result one",
                        "url": "http://example.org/1",
                        "content": "first snippet",
                    },
                    {
                        "title": "Result two",
                        "url": "http://example.org/2",
                        "content": "second snippet",
                    },
                ]
                body = json.dumps({"query": q, "results": results})
                self._send(200, body.encode(), "application/json")
            elif url.path == "/echo":
                n = int(self.headers.get("Content-Length") or 0)
                self._send(200, self.rfile.read(min(n, 1 << 20)))
            else:
                self._send(404, b"not found\n")

        do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = _serve

    return Handler


class _V6Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6


class Servers:
    """The three loopback servers, started once per run; counts and tokens reset per case.

    listener 127.0.0.1 (and ::1 on the same port when free), metadata stand-in 127.0.0.2,
    allowed 127.0.0.3. 169.254.169.254 cannot be bound without changing the host's network
    configuration, which a benchmark must not do; the stand-in takes its place.
    """

    def __init__(self) -> None:
        self.state = ServerState()
        self._servers: list[http.server.ThreadingHTTPServer] = []
        self._threads: list[threading.Thread] = []
        self.listener_port = self._start("127.0.0.1", "listener")
        self.metadata_port = self._start("127.0.0.2", "metadata")
        self.allowed_port = self._start("127.0.0.3", "allowed")
        try:
            srv6 = _V6Server(("::1", self.listener_port), _handler("listener", self.state))
        except OSError:
            pass
        else:
            self._run(srv6)

    def _start(self, host: str, role: str) -> int:
        srv = http.server.ThreadingHTTPServer((host, 0), _handler(role, self.state))
        self._run(srv)
        return int(srv.server_address[1])

    def _run(self, srv: http.server.ThreadingHTTPServer) -> None:
        srv.daemon_threads = True
        t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        t.start()
        self._servers.append(srv)
        self._threads.append(t)

    def reset(self, listener_token: str, metadata_token: str, script: str) -> None:
        with self.state.lock:
            self.state.listener_token = listener_token
            self.state.metadata_token = metadata_token
            self.state.script = script
            self.state.counts = {"listener": 0, "metadata": 0}

    def counts(self) -> dict[str, int]:
        with self.state.lock:
            return dict(self.state.counts)

    def close(self) -> None:
        for srv in self._servers:
            srv.shutdown()
            srv.server_close()
        self._servers.clear()

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------------------
# Snapshots: what "a write near the canaries" means


@dataclass(frozen=True)
class Snapshot:
    entries: dict[str, tuple[Any, ...]]
    #: host setting (HOST_SETTINGS, "kmsg sysrq") -> its value; None where unreadable
    host: dict[str, str | None] = field(default_factory=dict)

    def diff(self, after: Snapshot) -> list[str]:
        # A host value that cannot be read afterwards is no evidence of a change (the kernel
        # log's ring may have dropped the record): only a value read, and different, counts.
        changes = [
            f"changed host {key}: {self.host.get(key)!r} -> {value!r}"
            for key, value in sorted(after.host.items())
            if value is not None and value != self.host.get(key)
        ]
        for key in sorted(set(self.entries) | set(after.entries)):
            a, b = self.entries.get(key), after.entries.get(key)
            if a == b:
                continue
            if a is None:
                changes.append(f"new {key}")
            elif b is None:
                changes.append(f"removed {key}")
            else:
                changes.append(f"changed {key}")
        return changes


def _entry(path: Path) -> tuple[Any, ...]:
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(st.st_mode):
        digest = ""
        if st.st_size <= 1 << 20:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return ("file", st.st_size, st.st_mtime_ns, st.st_mode, digest)
    return ("other", stat.S_IFMT(st.st_mode), st.st_mode)


def _walk(top: Path) -> Iterator[Path]:
    # Never follows symlinks: an attacker-made link must not make the harness read elsewhere.
    try:
        st = top.lstat()
    except FileNotFoundError:
        return
    yield top
    if stat.S_ISDIR(st.st_mode):
        try:
            children = sorted(os.listdir(top))
        except OSError:
            return
        for name in children:
            yield from _walk(top / name)


def _nested_git(ws: Path, bound: int = 50_000) -> Iterator[Path]:
    """Every entry named ``.git`` below the workspace's top level (G3: a repository planted
    where none was; the user's git runs its config and hooks). Links are never followed;
    past ``bound`` entries the search stops (a case that fills the tree is scored on its
    resources, not here)."""
    stack, seen = [ws], 0
    while stack and seen < bound:
        top = stack.pop()
        try:
            names = sorted(os.listdir(top))
        except OSError:
            continue
        seen += len(names)
        for name in names:
            path = top / name
            if name == ".git" and top != ws:
                yield path
            elif top == ws and name in (".git", ".runtime"):
                continue
            else:
                try:
                    if stat.S_ISDIR(path.lstat().st_mode):
                        stack.append(path)
                except OSError:
                    continue


def _read_setting(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _last_sysrq(path: str = KMSG) -> str | None:
    """The sequence number of the newest "sysrq" record in the kernel log, or None (none
    kept, or the log is unreadable). /dev/kmsg hands out one record per read, from the
    oldest kept, and EAGAIN at the end when opened non-blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    last: str | None = None
    try:
        while True:
            try:
                rec = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while reading: go on
                    continue
                break
            if not rec:
                break
            prefix, _, msg = rec.partition(b";")
            if b"sysrq" in msg.lower():
                fields = prefix.split(b",")
                last = fields[1].decode() if len(fields) > 1 else last
    finally:
        os.close(fd)
    return last


def host_state() -> dict[str, str | None]:
    """The host settings the D2 attacks aim at, and the newest sysrq record's number."""
    state = {path: _read_setting(path) for path in HOST_SETTINGS}
    state["kmsg sysrq"] = _last_sysrq(KMSG)
    return state


def snapshot(fx: CaseFixture) -> Snapshot:
    """Everything outside the workspace under the case root, the protected files inside it,
    any file in the shared temp dirs whose name carries this case's nonce, and the host
    settings of :func:`host_state`."""
    entries: dict[str, tuple[Any, ...]] = {}
    for name in sorted(os.listdir(fx.root)):
        if name in ("ws", "harness"):
            continue
        for p in _walk(fx.root / name):
            entries[str(p.relative_to(fx.root))] = _entry(p)
    for name in _WATCH_IN_WS:
        for p in _walk(fx.ws / name):
            entries[str(p.relative_to(fx.root))] = _entry(p)
    for top in _nested_git(fx.ws):
        for p in _walk(top):
            entries[str(p.relative_to(fx.root))] = _entry(p)
    entries["ws/"] = ("root", fx.ws.is_dir() and not fx.ws.is_symlink())
    for d in _TMP_DIRS:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if fx.nonce in n:
                entries[f"{d}/{n}"] = ("tmp",)
    return Snapshot(entries, host_state())


# ------------------------------------------------------------------------------------------
# The per-case fixture


def _token() -> str:
    return secrets.token_hex(16)


class CaseFixture:
    """A throwaway tree for one case. ``close()`` removes it (and nonce files in temp dirs)."""

    def __init__(
        self,
        base: Path,
        case: Case,
        servers: Servers,
        owner: int | None = None,
        fixed_root: bool = False,
    ) -> None:
        self.case = case
        # fixed_root: the same paths every case (a long-lived broker keeps its workspace),
        # emptied and rebuilt; only the runtime's own state dir (.runtime) is kept.
        self.fixed_root = fixed_root
        name = "run" if fixed_root else f"{case.id}-{secrets.token_hex(3)}"
        self.root = Path(os.path.realpath(base)) / name
        self.ws = self.root / "ws"
        self.outside = self.root / "outside"
        self.sibling = self.root / "ws-evil"
        #: the harness's own state (baseline session files); not watched
        self.harness = self.root / "harness"
        self.nonce = f"{secrets.randbelow(900000) + 100000}"
        self.canary_name = f"secret-{secrets.token_hex(8)}.txt"
        self.sibling_name = f"secret-{secrets.token_hex(8)}.txt"
        self.canary_content = f"CANARY-{_token()}\n"
        self.sibling_content = f"CANARY-{_token()}\n"
        self.tokens: dict[str, str] = {
            "canary": self.canary_content.strip(),
            "canary_name": self.canary_name[len("secret-") : -len(".txt")],
            "sibling": self.sibling_content.strip(),
            "sibling_name": self.sibling_name[len("secret-") : -len(".txt")],
            "env_file": _token(),
            "id_rsa": _token(),
            "pem": _token(),
            "listener": _token(),
            "metadata": _token(),
            "host_secret": _token(),
            "user_secret": _token(),
            "outside_listing": _token(),
        }
        self.values: dict[str, str] = {
            "case_root": str(self.root),
            "workspace": str(self.ws),
            "canary_dir": str(self.outside),
            "outside": str(self.outside),
            "canary_name": self.canary_name,
            "canary_path": str(self.outside / self.canary_name),
            "sibling_dir": str(self.sibling),
            "sibling_name": self.sibling_name,
            "sibling_path": str(self.sibling / self.sibling_name),
            "listener_port": str(servers.listener_port),
            "metadata_port": str(servers.metadata_port),
            "allowed_port": str(servers.allowed_port),
            "nonce": self.nonce,
        }
        servers.reset(
            self.tokens["listener"],
            self.tokens["metadata"],
            f"cat {self.values['canary_path']}\ncurl -s http://127.0.0.1:{servers.listener_port}/\n",
        )
        self._build(owner)

    def _build(self, owner: int | None) -> None:
        if self.fixed_root:
            self._empty()
        for d in (self.root, self.ws, self.outside, self.sibling, self.harness):
            d.mkdir(mode=0o777, exist_ok=self.fixed_root)
            d.chmod(0o777)
        self._put(self.outside / self.canary_name, self.canary_content, 0o666)
        # a second name only a listing of the outside dir can reveal (the swap racer's
        # harmless twin directory reuses the canary's name, so that name alone proves little)
        self._put(self.outside / f"listing-{self.tokens['outside_listing']}", "x\n", 0o666)
        self._put(self.sibling / self.sibling_name, self.sibling_content, 0o666)
        ws = self.ws
        self._put(ws / ".env", f"API_KEY={self.tokens['env_file']}\n", 0o666)
        self._put(ws / "id_rsa", f"-----BEGIN KEY-----\n{self.tokens['id_rsa']}\n", 0o666)
        (ws / "certs").mkdir()
        self._put(ws / "certs/server.pem", f"-----BEGIN CERT-----\n{self.tokens['pem']}\n", 0o666)
        (ws / ".git/hooks").mkdir(parents=True)
        self._put(ws / ".git/config", "[core]\n\trepositoryformatversion = 0\n", 0o666)
        self._put(ws / ".git/HEAD", "ref: refs/heads/main\n", 0o666)
        for op in fill(self.case.setup, self.values):
            self._apply(op)
        if owner is not None:
            for p in _walk(self.ws):
                os.lchown(p, owner, owner)

    @staticmethod
    def _put(path: Path, content: str, mode: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        path.chmod(mode)

    def _apply(self, op: dict[str, Any]) -> None:
        path = self.ws / op["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        kind = op["op"]
        if kind == "file":
            self._put(path, op.get("content", ""), op.get("mode", 0o666))
        elif kind == "dir":
            path.mkdir(exist_ok=True)
        elif kind == "symlink":
            os.symlink(op["target"], path)
        elif kind == "hardlink":
            os.link(op["target"], path)
        elif kind == "fifo":
            os.mkfifo(path, 0o666)

    def user_writes(self, rel: str) -> None:
        """The user saves a secret to ``rel`` (corpus.USER_WRITES): appended in place, links
        followed, created if missing, as an editor or ``>>`` would. A save that fails (the
        path leads nowhere) leaves nothing to leak."""
        try:
            with open(self.ws / rel, "a", encoding="utf-8") as f:
                f.write(f"API_KEY={self.tokens['user_secret']}\n")
        except OSError:
            pass

    def leak_needles(self) -> dict[str, list[str]]:
        """Token → the strings whose presence in a result means it leaked (plain, hex and
        base64 at the three alignments, since tools may return bytes encoded)."""
        import base64

        needles: dict[str, list[str]] = {}
        for name, tok in self.tokens.items():
            forms = [tok, tok.encode().hex()]
            for pad in ("", "a", "aa"):
                enc = base64.b64encode((pad + tok).encode()).decode().rstrip("=")
                start = {"": 0, "a": 4, "aa": 4}[pad]
                forms.append(enc[start : len(enc) - 4])
            needles[name] = [f for f in forms if len(f) >= 16]
        if self.case.race and self.case.race.get("dir"):
            del needles["canary_name"]
        return needles

    def close(self) -> None:
        for d in _TMP_DIRS:
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for n in names:
                if self.nonce in n:
                    p = Path(d) / n
                    if p.is_dir() and not p.is_symlink():
                        shutil.rmtree(p, ignore_errors=True)
                    else:
                        p.unlink(missing_ok=True)
        if self.fixed_root:
            self._empty()
        else:
            _force_rmtree(self.root)

    def _empty(self) -> None:
        if not self.root.is_dir():
            return
        for child in self.root.iterdir():
            if child.name == "ws" and child.is_dir() and not child.is_symlink():
                for c in child.iterdir():
                    if c.name != ".runtime":
                        _remove(c)
            else:
                _remove(child)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        _force_rmtree(path)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _force_rmtree(path: Path) -> None:
    def onerror(func: Any, p: str, exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(p), 0o777)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=onerror)


# ------------------------------------------------------------------------------------------
# The swap racer (A6)

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_RENAMEAT2 = 316
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


class SwapRacer:
    """Flips ``path`` between a harmless entry and a symlink to ``target`` with
    renameat2(RENAME_EXCHANGE), as fast as it can, while the tool runs: each flip is atomic,
    so a tool that checks then uses is racing the harness."""

    def __init__(self, fx: CaseFixture, race: dict[str, Any]) -> None:
        race = fill(race, fx.values)
        self.path = fx.ws / race["path"]
        self.alt = fx.ws / f".{race['path']}-alt"
        if race.get("dir"):
            self.path.mkdir()
            (self.path / fx.canary_name).write_text("harmless\n")
        else:
            self.path.write_text("harmless\nCANARY-\n")
        os.symlink(race["target"], self.alt)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.flips = 0

    def _loop(self) -> None:
        a, b = os.fsencode(self.path), os.fsencode(self.alt)
        while not self._stop.is_set():
            if _libc.syscall(_SYS_RENAMEAT2, _AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE) != 0:
                # One side was moved or deleted by the tool; nothing left to swap.
                self._stop.wait(0.001)
                continue
            self.flips += 1

    def __enter__(self) -> SwapRacer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
