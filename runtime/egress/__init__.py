"""Brokered network egress: the sandbox has no network; the broker's gateway fetches for it.

::

    from runtime.egress import EgressGateway, EgressDenied

    async with EgressGateway(policy.network) as gw:
        reply = await gw.handle("http", {"method": "GET", "url": "https://example.org/",
                                         "headers": {}, "body": None, "max_bytes": 65536,
                                         "timeout_s": 10.0, "follow_redirects": True})

Payload fields (all but ``url`` optional): ``method`` GET | HEAD | POST | PUT | PATCH |
DELETE | OPTIONS (default GET); ``headers`` {name: value}, hop-by-hop, Host and
Content-Length dropped; ``body`` bytes or str; ``max_bytes`` body cap, bytes (default and
ceiling the policy's ``max_response_bytes``); ``timeout_s`` whole request including redirects
and retries, seconds (default and ceiling the policy's ``timeout_s``); ``follow_redirects``
(default true; at most the policy's ``max_redirects``). A redirect to another origin
(scheme, host or port) takes only these of the caller's headers with it: Accept,
Accept-Encoding, Accept-Language, Cache-Control, Range, User-Agent, the If-Match,
If-None-Match, If-Modified-Since, If-Unmodified-Since and If-Range conditionals, and, while
the body is still sent (307, 308), Content-Type, Content-Encoding and Content-Language;
every other header (Authorization, Cookie, any custom one) is dropped for the rest of the
request, since no name tells a credential from data. ``secret_headers`` [names] drops
those named even from that list.

``stream(payload)`` (an async context manager) sends the same request under the same checks
and yields a :class:`StreamedReply` whose body is read as it arrives (``chunks(want)``), for
SSE streams; ``timeout_s`` then bounds the exchange up to the headers, the caller the rest.

Reply: ``{"status": int, "headers": {lower-case name: value}, "body": bytes, "truncated":
bool, "url": final URL, "redirects": [URLs followed]}``. Bodies in gzip/deflate are decoded
(under the cap) and their Content-Encoding header removed.

Errors: :class:`EgressDenied` (``policy_denied``) when a target is refused — its ``rule``
is the policy's rule id, or ``egress.url``, ``egress.scheme``, ``egress.address`` for the
gateway's own checks; :class:`~runtime.errors.ToolTimeout` past the time cap;
:class:`~runtime.errors.ToolFailed` for other network failures, with ``details["reason"]``:
``connect_failed`` (nothing answered the dial: refused, unreachable), ``connection_closed``
(the server hung up or reset before a complete reply), ``protocol_error`` (the reply is not
HTTP/1.1), ``tls_error`` (handshake or certificate), ``network_error`` (any other),
``name_not_resolved``, ``too_many_redirects``, ``bad_compression``; the message keeps the
library's own text; :class:`~runtime.errors.InvalidArguments` for a malformed payload.
"""

from __future__ import annotations

from runtime.egress._addresses import address_class
from runtime.egress._gateway import EgressGateway, StreamedReply, TransportFactory
from runtime.egress._transport import PIN_EXTENSION, PinnedTransport
from runtime.egress._types import (
    EgressDenied,
    IPAddress,
    NetworkRulesLike,
    NetworkVerdictLike,
    Resolver,
)
from runtime.egress._url import IDNA_IMPLEMENTATION, TargetURL, parse_ipv4_host, parse_target

__all__ = [
    "IDNA_IMPLEMENTATION",
    "PIN_EXTENSION",
    "EgressDenied",
    "EgressGateway",
    "IPAddress",
    "NetworkRulesLike",
    "NetworkVerdictLike",
    "PinnedTransport",
    "Resolver",
    "StreamedReply",
    "TargetURL",
    "TransportFactory",
    "address_class",
    "parse_ipv4_host",
    "parse_target",
]
