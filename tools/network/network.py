"""Network tools: http_get, http_post, http_request, web_fetch, web_search.

They run inside the sandbox, which has no network at all: every request goes to the broker's
egress gateway (``ctx.ask_broker("http", ...)``, see ``runtime.egress``), which applies the
policy's domain rules, the SSRF checks, and the size and time caps. What comes back is
untrusted bytes; turning HTML into text or markdown happens here, in the sandbox, so a parser
bug in bs4/markdownify is contained by the sandbox rather than the broker.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import re
import time
from typing import Any
from urllib.parse import urlencode

from bs4 import BeautifulSoup
from markdownify import markdownify

from runtime.errors import InvalidArguments, RuntimeToolError, ToolFailed
from runtime.toolkit import ToolContext, json_head

__all__ = ["http_get", "http_post", "http_request", "web_fetch", "web_search"]

_TEXT_TYPES = re.compile(
    r"^(text/|application/(json|xml|javascript|ecmascript|x-www-form-urlencoded|[\w.+-]*\+(json|xml))"
    r"|image/svg\+xml)",
    re.IGNORECASE,
)
_CHARSET = re.compile(r"charset\s*=\s*\"?([\w.:-]+)", re.IGNORECASE)
_HTML_TYPES = ("text/html", "application/xhtml+xml")
#: Share of the result budget (Limits.output_bytes) spent on the body: base64 grows it by a
#: third and the headers and JSON framing need room too.
_BODY_SHARE = 0.5
#: Seconds of a batch web_fetch's time limit kept for the result's way back to the broker:
#: past the limit the broker kills the call and every page read so far is lost.
_BATCH_RESERVE_S = 1.0


#: Room left in the output cap beyond a result's own JSON (the frame's envelope), bytes.
_RESULT_MARGIN = 64


def _body_budget(ctx: ToolContext) -> int:
    return max(1024, int(ctx.limits.output_bytes * _BODY_SHARE))


def _fit(result: dict[str, Any], key: str, cap: int) -> dict[str, Any]:
    """``result`` with its ``key`` text cut so that the whole result fits ``cap`` bytes of
    JSON (``truncated`` set when cut). The body budget bounds bytes *read*; decoded and
    escaped they can take more (a Latin-1 byte becomes 2 bytes of UTF-8, a replaced invalid
    byte 3, a control character 6 in JSON), and the headers come on top: such a page failed
    the call with output_too_large. Base64 is cut on a 4-character boundary (still valid)."""
    text: str = result[key]
    result[key] = ""
    rest = len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    room = max(cap - rest - _RESULT_MARGIN, 0)
    cut = text[: room // 4 * 4] if result.get("encoding") == "base64" else json_head(text, room)
    result[key] = cut
    if len(cut) < len(text):
        result["truncated"] = True
    return result


def _ask(ctx: ToolContext, payload: dict[str, Any]) -> dict[str, Any]:
    reply = ctx.ask_broker("http", payload)
    if not isinstance(reply, dict) or not isinstance(reply.get("body"), bytes | bytearray):
        raise ToolFailed("the egress gateway sent a malformed reply")
    return reply


def _charset(content_type: str) -> str | None:
    """The text encoding the server names, or None (then UTF-8) for none, an unknown one,
    or a codec that is not a text encoding: the name is the server's choice, and
    ``codecs.lookup`` also finds bytes-to-bytes codecs (``zlib`` inflated past the
    gateway's decompression cap, ``hex``) and str-to-str ones (``rot13``)."""
    m = _CHARSET.search(content_type)
    if m is None:
        return None
    try:
        info = codecs.lookup(m.group(1))
    except LookupError:
        return None
    if not getattr(info, "_is_text_encoding", True):
        return None
    return info.name


def _decode_text(data: bytes, charset: str, truncated: bool) -> str | None:
    """Strict decode; a multi-byte character cut by truncation is dropped, not mangled."""
    try:
        decoder = codecs.getincrementaldecoder(charset)(errors="strict")
        return str(decoder.decode(data, final=not truncated))
    except (UnicodeDecodeError, LookupError):
        return None


def _http(args: dict[str, Any], ctx: ToolContext, method: str) -> dict[str, Any]:
    body: bytes | None = None
    if args.get("body") is not None:
        if args.get("body_encoding", "text") == "base64":
            try:
                body = base64.b64decode(args["body"], validate=True)
            except (binascii.Error, ValueError) as exc:
                raise InvalidArguments("body is not valid base64", field="body") from exc
        else:
            body = str(args["body"]).encode("utf-8")
    reply = _ask(
        ctx,
        {
            "method": method,
            "url": args["url"],
            "headers": dict(args.get("headers") or {}),
            "body": body,
            "max_bytes": _body_budget(ctx),
            "timeout_s": float(ctx.limits.timeout_s),
            "follow_redirects": bool(args.get("follow_redirects", True)),
        },
    )
    headers = {str(k): str(v) for k, v in dict(reply.get("headers") or {}).items()}
    data = bytes(reply["body"])
    truncated = bool(reply.get("truncated"))
    ctype = headers.get("content-type", "")
    text: str | None = None
    if not ctype or _TEXT_TYPES.match(ctype):
        text = _decode_text(data, _charset(ctype) or "utf-8", truncated)
    result = {
        "status": int(reply["status"]),
        "headers": headers,
        "body": text if text is not None else base64.b64encode(data).decode("ascii"),
        "encoding": "text" if text is not None else "base64",
        "truncated": truncated,
        "url": str(reply.get("url", args["url"])),
    }
    return _fit(result, "body", ctx.limits.output_bytes)


def http_get(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return _http(args, ctx, "GET")


def http_post(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return _http(args, ctx, "POST")


def http_request(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return _http(args, ctx, str(args["method"]).upper())


def _html_to(fmt: str, data: bytes, charset: str | None) -> str:
    soup = BeautifulSoup(data, "html.parser", from_encoding=charset)
    # Scripts, styles and templates are code, not content; an LLM reading them is noise at
    # best and prompt injection at worst.
    for tag in soup(["script", "style", "noscript", "template", "iframe", "object", "embed"]):
        tag.decompose()
    if fmt == "markdown":
        body = soup.body or soup
        text = str(markdownify(str(body), heading_style="ATX", strip=["img"]))
        return re.sub(r"\n{3,}", "\n\n", text).strip()
    lines = (line.strip() for line in soup.get_text("\n").splitlines())
    return "\n".join(line for line in lines if line)


def _fetch_page(
    ctx: ToolContext, url: str, fmt: str, max_chars: int, *, max_bytes: int, timeout_s: float
) -> dict[str, Any]:
    """One page as web_fetch returns it, before the output cap (``_fit``)."""
    reply = _ask(
        ctx,
        {
            "method": "GET",
            "url": url,
            "headers": {"Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"},
            "body": None,
            "max_bytes": max_bytes,
            "timeout_s": timeout_s,
            "follow_redirects": True,
        },
    )
    headers = {str(k).lower(): str(v) for k, v in dict(reply.get("headers") or {}).items()}
    ctype = headers.get("content-type", "")
    data = bytes(reply["body"])
    truncated = bool(reply.get("truncated"))
    charset = _charset(ctype)
    is_html = ctype.split(";")[0].strip().lower() in _HTML_TYPES or (
        not ctype and data.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html"))
    )
    if is_html and fmt != "html":
        content = _html_to(fmt, data, charset)
    elif is_html or not ctype or _TEXT_TYPES.match(ctype):
        decoded = _decode_text(data, charset or "utf-8", truncated)
        if decoded is None:
            decoded = data.decode(charset or "utf-8", errors="replace")
        content = decoded
    else:
        raise ToolFailed(
            f"web_fetch returns text; {reply.get('url', url)} is {ctype!r} "
            "(use http_get for binary content)",
            content_type=ctype,
        )
    if len(content) > max_chars:
        content, truncated = content[:max_chars], True
    return {
        "url": str(reply.get("url", url)),
        "status": int(reply["status"]),
        "content": content,
        "truncated": truncated,
    }


def web_fetch(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    fmt = args.get("format", "markdown")
    max_chars = int(args.get("max_chars", 50_000))
    urls: list[str] = ([args["url"]] if "url" in args else []) + list(args.get("urls") or [])
    if not urls:
        # Not a schema ``anyOf``: OpenAI and Anthropic refuse one at the top of a tool's
        # parameters, so the "one of the two" rule is checked here.
        raise InvalidArguments("give url or urls (a list of URLs)", field="url")
    if "urls" not in args:
        page = _fetch_page(
            ctx,
            urls[0],
            fmt,
            max_chars,
            max_bytes=_body_budget(ctx),
            timeout_s=float(ctx.limits.timeout_s),
        )
        return _fit(page, "content", ctx.limits.output_bytes)
    return _fetch_pages(ctx, urls, fmt, max_chars)


def _fetch_pages(ctx: ToolContext, urls: list[str], fmt: str, max_chars: int) -> dict[str, Any]:
    """Batch mode (CountBot's ``urls``): the pages in order, each with its content or its
    error, so that one dead link does not cost the others. The call's time limit and output
    cap are shared: each request gets the time left (a request that outlived it would have
    the whole call killed, the pages already read with it), and each page an equal share of
    the bytes. A refusal by the gateway (a redirect to a private address, say) is one page's
    error; a URL the policy denies never gets here (``urls`` has the ``url`` role)."""
    timeout_s = float(ctx.limits.timeout_s)
    deadline = time.monotonic() + timeout_s - min(_BATCH_RESERVE_S, timeout_s / 10)
    share = max(1024, _body_budget(ctx) // len(urls))
    pages: list[dict[str, Any]] = []
    for url in urls:
        left = deadline - time.monotonic()
        if left <= 0:
            pages.append(
                {
                    "url": url,
                    "error": "not fetched: the call's time limit was reached",
                    "error_type": "timeout",
                }
            )
            continue
        try:
            pages.append(_fetch_page(ctx, url, fmt, max_chars, max_bytes=share, timeout_s=left))
        except RuntimeToolError as exc:
            # Inside the sandbox a refusal arrives as ToolFailed naming the broker's type.
            kind = str(exc.details.get("refused_by_broker", exc.error_type))
            page = {"url": url, "error": exc.message, "error_type": kind}
            reason = exc.details.get("reason")
            if isinstance(reason, str):
                page["reason"] = reason  # connect_failed, tls_error, ... (see runtime.egress)
            pages.append(page)
    cap = ctx.limits.output_bytes
    room = max(cap - _RESULT_MARGIN * (len(pages) + 1), 0) // len(pages)
    fitted = [_fit(page, "content", room) if "content" in page else page for page in pages]
    result = {"pages": fitted, "count": len(fitted), "truncated": False}
    # A page whose share is smaller than the page without its content (a long final URL, a
    # small cap) overflows it; the last pages then give up their content (emptied, never
    # cut mid-way again) rather than the call failing with output_too_large and every page
    # lost. Emptying only shrinks the result, so this ends.
    for page in reversed(fitted):
        if _json_size(result) + _RESULT_MARGIN <= cap:
            break
        if page.get("content"):
            page["content"], page["truncated"] = "", True
    if _json_size(result) + _RESULT_MARGIN > cap:
        raise ToolFailed(
            f"{len(urls)} pages do not fit the {cap}-byte output cap even without their "
            "content; fetch fewer at once",
            reason="output_cap",
        )
    result["truncated"] = any(page.get("truncated", False) for page in fitted)
    return result


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _search_endpoint(ctx: ToolContext) -> str:
    endpoint = ctx.options.get("search_endpoint")
    if not endpoint:
        endpoint = ctx.ask_broker("search_endpoint", {}).get("url")
    if not isinstance(endpoint, str) or not endpoint:
        raise ToolFailed("web_search is not configured: the policy names no search endpoint")
    return endpoint


def web_search(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    query = str(args["query"]).strip()
    if not query:
        raise InvalidArguments("query must not be blank", field="query")
    limit = int(args.get("limit", 8))
    endpoint = _search_endpoint(ctx)
    base = endpoint.partition("#")[0]
    sep = "&" if "?" in base else "?"
    url = f"{base}{sep}{urlencode({'q': query, 'format': 'json'})}"
    reply = _ask(
        ctx,
        {
            "method": "GET",
            "url": url,
            "headers": {"Accept": "application/json"},
            "body": None,
            "max_bytes": _body_budget(ctx),
            "timeout_s": float(ctx.limits.timeout_s),
            "follow_redirects": True,
        },
    )
    status = int(reply["status"])
    if status != 200:
        raise ToolFailed(f"the search endpoint answered HTTP {status}", status=status)
    if reply.get("truncated"):
        raise ToolFailed("the search endpoint's answer was larger than the result budget")
    try:
        data = json.loads(bytes(reply["body"]))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ToolFailed("the search endpoint did not answer JSON") from exc
    raw = data.get("results") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        raise ToolFailed("the search endpoint's JSON has no 'results' list")
    results: list[dict[str, str]] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        results.append(
            {
                "title": str(item.get("title") or ""),
                "url": item["url"],
                "snippet": str(item.get("content") or item.get("snippet") or ""),
            }
        )
        if len(results) >= limit:
            break
    return {"results": results}
