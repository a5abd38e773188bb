"""What the gateway needs from the policy, and the error it raises when a target is refused."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from ipaddress import IPv4Address, IPv6Address
from typing import Any, Protocol

from runtime.errors import PolicyDenied

__all__ = ["EgressDenied", "IPAddress", "NetworkRulesLike", "NetworkVerdictLike", "Resolver"]

IPAddress = IPv4Address | IPv6Address

#: ``(host, port) -> addresses``: how the gateway resolves a name. The default runs
#: ``getaddrinfo`` in a worker thread; tests inject a fake (rebinding, names -> loopback).
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]


class NetworkVerdictLike(Protocol):
    """The policy's ``NetworkVerdict`` (a NamedTuple ``(allowed, rule, reason)``)."""

    @property
    def allowed(self) -> bool: ...
    @property
    def rule(self) -> str: ...
    @property
    def reason(self) -> str: ...


class NetworkRulesLike(Protocol):
    """The policy's ``NetworkRules`` (``runtime.policy.network``), as far as egress uses it.

    Fields: ``schemes`` allowed URL schemes; ``ports`` allowed ports; ``max_redirects``
    redirects followed per request; ``timeout_s`` wall clock of one request including
    redirects and retries, seconds; ``max_response_bytes`` largest body returned, bytes;
    ``retries`` extra attempts of idempotent requests on transient failures;
    ``search_endpoint`` the SearXNG-style JSON endpoint web_search uses, or None.
    """

    # Read-only properties, so frozen dataclasses and pydantic models satisfy the protocol.
    @property
    def schemes(self) -> Sequence[str]: ...
    @property
    def ports(self) -> Sequence[int]: ...
    @property
    def max_redirects(self) -> int: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def max_response_bytes(self) -> int: ...
    @property
    def retries(self) -> int: ...
    @property
    def search_endpoint(self) -> str | None: ...

    def check(self, scheme: str, host: str, port: int) -> NetworkVerdictLike:
        """May this target be contacted? ``host`` is already lower-cased, IDNA-encoded,
        without a trailing dot; an IP literal is in its canonical text form."""
        ...

    def address_allowed(
        self, host: str, ip: IPv4Address | IPv6Address, port: int | None = None
    ) -> bool:
        """May ``host`` connect to this non-public ``ip`` on ``port``? True only when the
        policy names it explicitly, on that port if its entry has one (that is how tests
        reach servers on 127.0.0.1)."""
        ...


class EgressDenied(PolicyDenied):
    """The gateway refused a target: bad URL, scheme, domain rule, or a non-public address.

    ``details`` carry ``rule`` (the policy rule id, or ``egress.url`` / ``egress.address`` /
    ``egress.redirect`` for the gateway's own checks) and, where known, ``host``,
    ``address`` and ``address_class``.
    """

    def __init__(self, message: str, *, rule: str, **details: Any) -> None:
        super().__init__(message, rule=rule, **details)
        self.rule = rule
