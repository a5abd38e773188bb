"""Network rules: which (scheme, host, port) a tool may reach through the egress gateway.

The gateway calls :meth:`NetworkRules.check` on the URL's host (already lower-cased and
IDNA-encoded by the caller) before connecting, and :meth:`NetworkRules.address_allowed` on
every address the name resolved to, so a public name that resolves to ``127.0.0.1`` (DNS
rebinding) is refused at connect time.

Private targets (loopback, RFC 1918, link-local incl. cloud metadata ``169.254.169.254``, CGNAT,
ULA, unspecified, multicast, reserved) are reachable only when the policy names them
explicitly:

- a URL whose host is the IP literal itself, allowed by an equal IP entry or by a CIDR entry
  that lies entirely in non-public space (``127.0.0.1``, ``10.0.0.0/8``; ``0.0.0.0/1``
  covers public addresses only);
- a host name with an exact allow entry (``db.internal``), and only with
  ``allow_private = true``.

Wildcards (``*``, ``*.example.com``) never reach a private address. Deny wins everywhere.

IPv6 forms that embed an IPv4 address (IPv4-mapped, NAT64 ``64:ff9b::/96`` and
``64:ff9b:1::/48``, 6to4 ``2002::/16``, IPv4-compatible, IPv4-translated, Teredo) — in a URL
or among the addresses a name resolves to — are judged by the embedded address too, but
only ever to narrow: a deny IP/CIDR entry covering the embedded IPv4 address denies the
IPv6 one, and an embedded private address makes it private. Allow entries match the
address as it is dialled and nothing else: ``allow = ["8.8.8.8"]`` does not open
``[64:ff9b::808:808]`` (that goes to whatever NAT64 translator is on the path, not to the
host the entry names; name the IPv6 address or its prefix to allow it). IPv4-mapped
addresses are the exception, being the IPv4 address itself on the wire.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from runtime._quote import cut, quoted
from runtime.policy._located import LocatedError

__all__ = ["IPAddress", "NetworkRules", "NetworkVerdict", "is_private_address", "url_parts"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_HOST_RE = re.compile(
    r"^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*$"
)
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class NetworkVerdict(NamedTuple):
    allowed: bool
    rule: str
    reason: str


def _canonical_ip(ip: IPAddress) -> IPAddress:
    # '::ffff:127.0.0.1' is 127.0.0.1 on the wire: judge the IPv4 address it maps to.
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


# IPv6 forms that carry an IPv4 address a translator or tunnel on the path delivers to:
# NAT64 (well-known and local-use prefixes), IPv4-compatible, and the SIIT-translated
# range. 6to4 and Teredo have their own accessors on IPv6Address.
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_IPV4_COMPAT = ipaddress.IPv6Network("::/96")
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address reaches through a standard embedding, if any."""
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if any(ip in net for net in _NAT64) or (ip in _IPV4_COMPAT and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _embedded_ipv4s(ip: IPAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """Every IPv4 address an IPv6 address embeds in a standard form (NAT64 with both
    prefixes, 6to4, IPv4-compatible, IPv4-translated, Teredo's server and client), for the
    deny entries: a translator or tunnel on the path may deliver to any of them, so a deny
    CIDR that covers one covers the address. () for IPv4 (an IPv4-mapped address was
    already made IPv4 by ``_canonical_ip``)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return ()
    found: list[ipaddress.IPv4Address] = []
    if ip.teredo is not None:
        found.extend(ip.teredo)
    inner = _embedded_ipv4(ip)
    if inner is not None:
        found.append(inner)
    if ip in _IPV4_TRANSLATED:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return tuple(dict.fromkeys(found))


def is_private_address(ip: IPAddress) -> bool:
    """True for anything that is not plain public unicast (loopback, private, metadata…).

    An IPv6 address embedding an IPv4 one is judged by both: '64:ff9b::a9fe:a9fe' (NAT64)
    and '2002:7f00:1::' (6to4) are private because of the address they reach. Hazard: the
    egress gateway classes addresses with ``runtime.egress._addresses.address_class`` and
    asks this function whether a non-public one may be dialled; the two must agree, and
    ``tests/egress/test_egress_policy_bypasses.py`` checks that they do.
    """
    ip = _canonical_ip(ip)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _IPV4_TRANSLATED or ip.is_site_local:
            return True
        inner = _embedded_ipv4(ip)
        if inner is not None:
            # An embedding ('64:ff9b::808:808' inside the reserved ::/8, 6to4's 2002::/16)
            # is judged by the address it reaches, as address_class does, and never by
            # this Python's tables for the embedding range: 3.11.2 calls 2002::/16 private,
            # 3.11.4 and later do not.
            return is_private_address(inner)
    special = ip.is_reserved or any(ip.version == n.version and ip in n for n in SPECIAL_PURPOSE)
    if special:
        return True
    return not ip.is_global or ip.is_multicast or ip.is_unspecified


#: Special-purpose ranges that this Python's ``is_global`` may still call global (its tables
#: follow the IANA registries of its release): IPv6 documentation 3fff::/20 (RFC 9637),
#: SRv6 SIDs 5f00::/16 (RFC 9602), the dummy prefix 100:0:0:1::/64 (RFC 9780), and IPv4's
#: 6to4 relay anycast, AS112 and AMT. ``runtime.egress._addresses.address_class`` names
#: them too: the two must agree.
SPECIAL_PURPOSE: tuple[_IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "3fff::/20",
        "5f00::/16",
        "100:0:0:1::/64",
        "192.88.99.0/24",
        "192.31.196.0/24",
        "192.52.193.0/24",
        "192.175.48.0/24",
    )
)


_PRIVATE_NETS: tuple[_IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)


def _all_private(net: _IPNetwork | None) -> bool:
    # A CIDR entry grants private addresses only when all of it is private space: '0.0.0.0/1'
    # starts and ends on private addresses yet is mostly public.
    return net is not None and any(
        net.version == p.version and net.subnet_of(p)  # type: ignore[arg-type]
        for p in _PRIVATE_NETS
    )


class _Entry(NamedTuple):
    text: str
    kind: str  # "host" | "suffix" | "any" | "ip" | "net"
    host: str  # host name, suffix (".example.com"), or "" for ip/net/any
    net: _IPNetwork | None
    port: int | None

    def covers_ip(self, ip: IPAddress) -> bool:
        return self.net is not None and ip.version == self.net.version and ip in self.net

    def denies_ip(self, ip: IPAddress) -> bool:
        """A deny entry's test: the address or any IPv4 address it embeds. (Allow entries
        use :meth:`covers_ip` alone: see the module docstring.)"""
        if self.net is None:
            return False
        return self.covers_ip(ip) or any(self.covers_ip(v4) for v4 in _embedded_ipv4s(ip))


def _parse_ip(text: str) -> IPAddress | None:
    try:
        return _canonical_ip(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        return None


def _split_port(text: str) -> tuple[str, int | None]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":"):
            return host, int(rest[1:])
        if rest:
            raise ValueError(f"bad bracketed address {text!r}")
        return host, None
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, int(port)
    return text, None


def _parse_entry(raw: str) -> _Entry:
    text = raw.strip().lower()
    if not text:
        raise ValueError("empty network entry")
    if "/" in text:
        net = ipaddress.ip_network(text, strict=False)
        return _Entry(raw, "net", "", net, None)
    host, port = _split_port(text)
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"port out of range in {raw!r}")
    host = host.rstrip(".")
    if host == "*":
        return _Entry(raw, "any", "", None, port)
    ip = _parse_ip(host)
    if ip is not None:
        return _Entry(raw, "ip", "", ipaddress.ip_network(ip), port)
    if host.startswith("*."):
        suffix = host[1:]
        if not _HOST_RE.match(suffix[1:]):
            raise ValueError(f"bad wildcard domain {raw!r}")
        return _Entry(raw, "suffix", suffix, None, port)
    if not _HOST_RE.match(host):
        raise ValueError(f"bad host {raw!r} (use 'example.com', '*.example.com', an IP or a CIDR)")
    return _Entry(raw, "host", host, None, port)


def url_parts(url: object) -> tuple[str, str, int] | str:
    """(scheme, host, port) of a URL as the policy judges it (a ``url`` argument, the
    search endpoint), or the reason it is refused."""
    if not isinstance(url, str):
        return "URL must be a string"
    if any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in url) or "\\" in url:
        # Whitespace, control characters and backslashes are where URL parsers disagree
        # (CVE-2023-24329 and friends): refuse rather than guess which host is meant.
        return "URL contains whitespace, control characters or backslashes"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"URL does not parse: {exc}"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "URL carries credentials ('user@host'); put them in headers"
    host = parts.hostname
    if not host:
        return "URL has no host"
    try:
        host = host.encode("idna").decode("ascii").lower()
    except UnicodeError as exc:
        return f"URL host is not a valid domain name: {exc}"
    scheme = parts.scheme.lower()
    if port is None:
        # Unknown schemes get port 0 and are then refused by the scheme rule, by name.
        port = _DEFAULT_PORTS.get(scheme) or 0
    return scheme, host, port


def _numeric_lookalike(host: str) -> bool:
    # '127.1', '0x7f000001', '2130706433', '0177.0.0.1': inet_aton (and so most HTTP clients)
    # reads these as addresses although they are not canonical dotted quads. Refuse them
    # outright rather than guess which address the client will dial.
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return True


class NetworkRules(BaseModel):
    """The ``[network]`` table: egress for tools with a ``url`` argument or ``sandbox.egress``."""

    model_config = ConfigDict(extra="forbid", strict=True)  # as the policy sections

    allow: list[str] = Field(
        default_factory=list,
        description="Hosts that may be reached: 'example.com' (exactly that name), "
        "'*.example.com' (subdomains only, not example.com), '*' (any public host), "
        "'api.x.io:8443' (one port), IP literals ('127.0.0.1', '[::1]:8080') and CIDRs "
        "('10.0.0.0/8'). Default empty: no egress.",
    )
    deny: list[str] = Field(
        default_factory=list,
        description="Hosts never reached, same syntax as allow. Deny wins. Default empty.",
    )
    schemes: list[str] = Field(
        default_factory=lambda: ["https", "http"],
        description="URL schemes allowed. Default ['https', 'http'].",
    )
    ports: list[int] = Field(
        default_factory=list, description="Ports allowed; empty = any port. Default empty."
    )
    allow_private: bool = Field(
        False,
        description="Let exact host-name allow entries resolve to private/loopback/link-local "
        "addresses. IP/CIDR entries naming a private range work without it; wildcards never "
        "reach private addresses. Default false.",
    )
    max_redirects: int = Field(5, ge=0, le=50, description="Redirects followed. Default 5.")
    timeout_s: float = Field(
        60.0, gt=0, le=3600, description="Timeout of network tools, seconds. Default 60."
    )
    max_response_bytes: int = Field(
        10 * 1024 * 1024, gt=0, description="Largest response body, bytes. Default 10 MiB."
    )
    retries: int = Field(0, ge=0, le=10, description="Retries of failed requests. Default 0.")
    search_endpoint: str | None = Field(
        None,
        description="SearXNG-style JSON search API used by web_search: an http(s) URL whose "
        "scheme, host and port these rules allow (else the policy is refused at load). "
        "Default none: web_search has no backend.",
    )

    _allow: tuple[_Entry, ...] = PrivateAttr(default=())
    _deny: tuple[_Entry, ...] = PrivateAttr(default=())
    _key: tuple[tuple[str, ...], tuple[str, ...]] | None = PrivateAttr(default=None)

    @field_validator("allow", "deny")
    @classmethod
    def _entries_parse(cls, v: list[str]) -> list[str]:
        for item in v:
            _parse_entry(item)
        return v

    @field_validator("schemes")
    @classmethod
    def _schemes_lower(cls, v: list[str]) -> list[str]:
        return [s.lower() for s in v]

    @field_validator("ports")
    @classmethod
    def _ports_range(cls, v: list[int]) -> list[int]:
        for p in v:
            if not 0 < p < 65536:
                raise ValueError(f"port {p} out of range 1..65535")
        return v

    def model_post_init(self, __context: Any) -> None:
        self._compile()

    @model_validator(mode="after")
    def _search_endpoint_reachable(self) -> NetworkRules:
        # web_search asks the egress gateway for this URL: one it refuses (not a URL, not
        # http(s), a host these very rules deny) made every web_search call that the policy
        # allowed fail policy_denied. Judged as a url argument is (url_parts, check): the
        # address a name resolves to is still for the gateway to see when it connects.
        endpoint = self.search_endpoint
        if endpoint is None:
            return self
        loc = ("search_endpoint",)
        parts = url_parts(endpoint)
        if isinstance(parts, str):
            raise LocatedError(
                f"search_endpoint {endpoint[:200]!r} is not a usable URL: {parts}", loc
            )
        if parts[0] not in ("http", "https"):
            raise LocatedError(
                f"search_endpoint {endpoint[:200]!r} must be an http or https URL, "
                f"not {parts[0]!r}",
                loc,
            )
        verdict = self.check(*parts)
        if not verdict.allowed:
            raise LocatedError(
                f"search_endpoint {endpoint[:200]!r} would be refused by these [network] rules "
                f"({verdict.rule}: {verdict.reason}): every web_search call would fail; allow "
                "its host (and port)",
                loc,
            )
        return self

    def _compile(self) -> None:
        # Recompiled whenever the lists changed: model_copy(update=...) and in-place edits
        # would otherwise leave stale compiled entries behind the visible fields.
        key = (tuple(self.allow), tuple(self.deny))
        if key != self._key:
            self._allow = tuple(_parse_entry(e) for e in self.allow)
            self._deny = tuple(_parse_entry(e) for e in self.deny)
            self._key = key

    # ----------------------------------------------------------------------------------------

    @staticmethod
    def _host_matches(entry: _Entry, host: str, ip: IPAddress | None, port: int) -> bool:
        if entry.port is not None and entry.port != port:
            return False
        if entry.kind == "any":
            return True
        if entry.kind == "host":
            return ip is None and host == entry.host
        if entry.kind == "suffix":
            return ip is None and host.endswith(entry.host)
        return ip is not None and entry.covers_ip(ip)

    def check(self, scheme: str, host: str, port: int) -> NetworkVerdict:
        """May a request go to ``scheme://host:port``? Lexical: addresses are checked later
        with :meth:`address_allowed`."""
        self._compile()
        scheme = scheme.lower()
        if scheme not in self.schemes:
            return NetworkVerdict(
                False, "network.scheme", f"scheme {quoted(scheme)} is not allowed ({self.schemes})"
            )
        if self.ports and port not in self.ports:
            return NetworkVerdict(False, "network.port", f"port {port} is not allowed")
        host = host.lower().rstrip(".")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        ip = _parse_ip(host)
        if ip is None:
            if not _HOST_RE.match(host):
                return NetworkVerdict(False, "network.invalid-host", f"invalid host {quoted(host)}")
            if _numeric_lookalike(host):
                return NetworkVerdict(
                    False, "network.invalid-host", f"ambiguous numeric host {quoted(host)}"
                )
        for entry in self._deny:
            if (
                self._host_matches(entry, host, ip, port)
                or (ip is None and entry.kind == "suffix" and host == entry.host[1:])
                or (
                    ip is not None
                    and (entry.port is None or entry.port == port)
                    and entry.denies_ip(ip)
                )
            ):
                return NetworkVerdict(
                    False, "network.deny", f"{cut(host)} is denied by {entry.text!r}"
                )
        if ip is not None and is_private_address(ip):
            for entry in self._allow:
                if entry.port is not None and entry.port != port:
                    continue
                if (entry.kind == "ip" and entry.covers_ip(ip)) or (
                    entry.kind == "net" and entry.covers_ip(ip) and _all_private(entry.net)
                ):
                    return NetworkVerdict(
                        True, "network.allow", f"{cut(host)} is named explicitly by {entry.text!r}"
                    )
            return NetworkVerdict(
                False, "network.private", f"{host} is a private address not named by the policy"
            )
        for entry in self._allow:
            if self._host_matches(entry, host, ip, port):
                return NetworkVerdict(
                    True, "network.allow", f"{cut(host)} allowed by {entry.text!r}"
                )
        return NetworkVerdict(
            False, "network.default", f"{cut(host)} is not in the network allow list"
        )

    def address_allowed(self, host: str, ip: IPAddress, port: int | None = None) -> bool:
        """May the (already host-checked) ``host`` connect to its resolved address ``ip``
        on ``port``?

        Public addresses: yes unless denied. Private ones only when named explicitly: if
        ``host`` is itself an IP literal, by an IP entry or an all-private CIDR entry covering
        it; if ``host`` is a name, by an exact entry for that name with ``allow_private``.
        An IP entry does not let *other* names resolve to that address: an allowed wildcard
        domain whose owner points it at 127.0.0.1 (rebinding) stays refused. An entry with a
        port names that port only: 'localhost:8080' beside '*' does not open
        'localhost:9999' (:meth:`check` passed it through the '*'). ``port`` None: any
        entry's port (callers that judge the address alone)."""
        self._compile()
        ip = _canonical_ip(ip)
        host = host.lower().rstrip(".").strip("[]")
        for entry in self._deny:
            if entry.denies_ip(ip):
                return False
        if not is_private_address(ip):
            return True
        literal = _parse_ip(host)
        for entry in self._allow:
            if port is not None and entry.port is not None and entry.port != port:
                continue
            if literal is not None and literal == ip:
                if entry.kind == "ip" and entry.covers_ip(ip):
                    return True
                if entry.kind == "net" and entry.covers_ip(ip) and _all_private(entry.net):
                    return True
            if self.allow_private and entry.kind == "host" and entry.host == host:
                return True
        return False

    @staticmethod
    def default_port_of(scheme: str) -> int | None:
        """The port a URL without one uses (80/443), None for unknown schemes."""
        return _DEFAULT_PORTS.get(scheme.lower())
