"""One strict URL parser: the host it returns is the host the policy sees and the gateway dials.

Hazard: every parser disagreement is an SSRF (``http://127.0.0.1:6666\\@1.1.1.1`` is
127.0.0.1 to one library and 1.1.1.1 to another; CPython's CVE-2023-24329 let leading blanks
skip a scheme check). So this parser refuses whatever two reasonable parsers could read
differently — userinfo, backslashes, blanks and control characters anywhere, percent-escapes
in the authority, empty or odd ports — instead of guessing. What it accepts it re-serialises
canonically, and only that canonical URL is sent.

Numeric hosts follow WHATWG/inet_aton: when the last label looks like a number the host IS an
IPv4 address (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``) or it is invalid; it is
never looked up as a name. Internationalised names go through the ``idna`` package (UTS #46
mapping, IDNA 2008), or the stdlib codec (IDNA 2003) where it is missing — see
:data:`IDNA_IMPLEMENTATION`; the mapping can turn full-width digits and dots into an IPv4 literal,
so the numeric test runs after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from types import ModuleType

from runtime.egress._types import EgressDenied, IPAddress

_idna: ModuleType | None
try:
    import idna as _idna
except ImportError:  # pragma: no cover - httpx depends on idna; kept for minimal installs
    _idna = None

__all__ = ["IDNA_IMPLEMENTATION", "TargetURL", "parse_ipv4_host", "parse_target"]

#: Which IDNA implementation names go through: the ``idna`` package (IDNA 2008 with UTS #46
#: mapping) when installed, else the standard library's ``encodings.idna`` (IDNA 2003).
IDNA_IMPLEMENTATION = (
    f"idna {_idna.__version__} (IDNA 2008, UTS #46)"
    if _idna is not None
    else "stdlib encodings.idna (IDNA 2003)"
)


def _to_ascii(host: str) -> str:
    """UnicodeError when the name is not valid IDNA."""
    if _idna is not None:
        try:
            return str(_idna.encode(host, uts46=True, transitional=False).decode("ascii"))
        except _idna.IDNAError as exc:
            raise UnicodeError(str(exc)) from exc
    return host.encode("idna").decode("ascii")


def _check_a_label(label: str) -> None:
    """UnicodeError when an ``xn--`` label is not valid punycode/IDNA."""
    if _idna is not None:
        try:
            _idna.decode(label)
        except _idna.IDNAError as exc:
            raise UnicodeError(str(exc)) from exc
    else:
        label.encode("ascii").decode("idna")


_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL_RE = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_NUMBER_RE = re.compile(r"^(?:0[xX][0-9A-Fa-f]*|[0-9]+)$")
_MAX_URL = 8192


@dataclass(frozen=True, slots=True)
class TargetURL:
    """A checked-parseable URL. ``host`` is canonical (lower-case A-labels without a trailing
    dot, or an IP address's compressed text); ``address`` is set when the host is an IP."""

    scheme: str
    host: str
    port: int
    target: str  # path and query, starting with "/"
    address: IPAddress | None

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if isinstance(self.address, IPv6Address) else self.host
        port = "" if _DEFAULT_PORTS[self.scheme] == self.port else f":{self.port}"
        return f"{self.scheme}://{host}{port}{self.target}"


def _deny(url: str, why: str) -> EgressDenied:
    return EgressDenied(f"refused URL {url[:200]!r}: {why}", rule="egress.url", reason=why)


def parse_ipv4_host(host: str) -> IPv4Address | None:
    """inet_aton / WHATWG IPv4 parsing: 1-4 parts, each decimal, octal (leading 0) or hex
    (0x); the last part fills the remaining bytes. None when the host is not numeric-looking;
    ValueError when it looks numeric but is not a valid address."""
    parts = host.split(".")
    if parts and parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if not parts or not _NUMBER_RE.match(parts[-1]):
        return None
    if len(parts) > 4:
        raise ValueError("more than four parts")
    values: list[int] = []
    for part in parts:
        if not _NUMBER_RE.match(part):
            raise ValueError(f"part {part!r} is not a number")
        if part[:2] in ("0x", "0X"):
            values.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not all(c in "01234567" for c in part):
                raise ValueError(f"part {part!r} is not octal")
            values.append(int(part, 8))
        else:
            values.append(int(part, 10))
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        raise ValueError("part out of range")
    number = last
    for i, v in enumerate(head):
        number += v << (8 * (3 - i))
    return IPv4Address(number)


def _parse_host(raw: str, url: str) -> tuple[str, IPAddress | None]:
    if raw.startswith("["):
        if not raw.endswith("]"):
            raise _deny(url, "unterminated IPv6 literal")
        inner = raw[1:-1]
        if not inner or "%" in inner or not all(c in "0123456789abcdefABCDEF:." for c in inner):
            raise _deny(url, "bad IPv6 literal")
        try:
            v6 = IPv6Address(inner)
        except ValueError as exc:
            raise _deny(url, "bad IPv6 literal") from exc
        return v6.compressed, v6
    if not raw:
        raise _deny(url, "empty host")
    host = raw
    if not host.isascii():
        try:
            host = _to_ascii(host)
        except UnicodeError as exc:
            raise _deny(url, f"host is not a valid internationalised name ({exc})") from exc
    host = host.lower()
    try:
        v4 = parse_ipv4_host(host)
    except ValueError as exc:
        raise _deny(url, f"numeric host is not a valid IPv4 address ({exc})") from exc
    if v4 is not None:
        return str(v4), v4
    if host.endswith("."):
        host = host[:-1]
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL_RE.match(label) for label in labels):
        raise _deny(url, "host is not a valid DNS name")
    for label in labels:
        if label.startswith("xn--"):
            try:
                _check_a_label(label)
            except UnicodeError as exc:
                raise _deny(url, f"bad punycode label {label!r}") from exc
    return host, None


def parse_target(url: str) -> TargetURL:
    """Parse an absolute http(s) URL strictly, or raise :class:`EgressDenied`."""
    if not isinstance(url, str) or not url:
        raise _deny(str(url), "not a URL")
    if len(url) > _MAX_URL:
        raise _deny(url, f"longer than {_MAX_URL} characters")
    for ch in url:
        if ch.isspace() or ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch in "\u200b\ufeff":
            raise _deny(url, f"contains whitespace or control character U+{ord(ch):04X}")
    if "\\" in url:
        raise _deny(url, "contains a backslash")
    m = _SCHEME_RE.match(url)
    if m is None:
        raise _deny(url, "no scheme")
    scheme = m.group(1).lower()
    if scheme not in _DEFAULT_PORTS:
        raise EgressDenied(
            f"refused URL scheme {scheme!r}: only http and https are fetched",
            rule="egress.scheme",
            reason=f"scheme {scheme} not allowed",
        )
    rest = url[m.end() :]
    if not rest.startswith("//"):
        raise _deny(url, "expected '//' after the scheme")
    rest = rest[2:]
    end = len(rest)
    for sep in "/?#":
        i = rest.find(sep)
        if i != -1:
            end = min(end, i)
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        raise _deny(url, "credentials ('@') in the URL are not allowed")
    if "%" in authority:
        raise _deny(url, "percent-escapes in the host are not allowed")
    port_text: str | None = None
    if authority.startswith("["):
        close = authority.find("]")
        host_raw = authority[: close + 1] if close != -1 else authority
        after = authority[len(host_raw) :]
        if after:
            if not after.startswith(":"):
                raise _deny(url, "junk after the IPv6 literal")
            port_text = after[1:]
    else:
        host_raw, colon, port_text_ = authority.partition(":")
        port_text = port_text_ if colon else None
    if port_text is None:
        port = _DEFAULT_PORTS[scheme]
    else:
        if not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
            raise _deny(url, f"bad port {port_text!r}")
        port = int(port_text)
        if not 0 < port < 65536:
            raise _deny(url, f"port {port} out of range")
    host, address = _parse_host(host_raw, url)
    tail = tail.partition("#")[0]
    if not tail.startswith("/"):
        tail = "/" + tail
    return TargetURL(scheme=scheme, host=host, port=port, target=tail, address=address)
