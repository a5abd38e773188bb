"""What is not one JSON-RPC 2.0 message as MCP carries it, and the short answer it gets.

Both transports ask :func:`invalid_request` about what the client sent (Streamable HTTP
before the SDK reads the body; stdio, where the SDK's reader hands on what it refused,
through :func:`answer_refused`): a batch, a JSON value that is not an object (``3``,
``"x"``), an object that is no request, notification or response (``{"hello": 1}``), or
one whose ``jsonrpc``, ``id``, ``method`` or ``params`` has the wrong type. The answer is JSON-RPC's
Invalid Request (-32600) with one sentence naming what is wrong, under the request's id
when the object is a request whose id could be read, else ``id: null`` (JSON-RPC 2.0 §5).
Before, Streamable HTTP answered -32602 ("invalid params") with the SDK's pydantic dump of
a kilobyte, and stdio dropped the line without an answer, so its client waited for ever.

Also caught: an ``id`` that is neither a string nor an integer (``{"a": 1}``, ``1.5``).
The SDK's notification model ignores members it does not know, so such a request was read
as a notification and never answered (HTTP: 202). On stdio such a line is answered
before the SDK reads it (``runtime.mcp.transport._StdinLines``).

A request nested deeper than any parser here reads (pydantic-core stops at 200 levels,
``json`` at the interpreter's stack) is a parse error (-32700): its id is taken from the
members of the top-level object that come before the first object or array
(:func:`leading_members`, a bounded scan without recursion), so the client's pending call
ends; when the id is not among them, the answer's id is null.

Hazard: the value is the client's; it is only inspected, and nothing of it but a valid id
goes back.
"""

from __future__ import annotations

import codecs
import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # C, no recursion
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = [
    "SCAN_CHARS",
    "answer_refused",
    "deep_parse_error",
    "invalid_request",
    "is_request_id",
    "leading_members",
    "parse_error",
    "request_id_at_start",
]

#: How much of a message :func:`leading_members` looks at, characters (or bytes).
SCAN_CHARS = 4096
_WS = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")


def is_request_id(value: object) -> bool:
    """A JSON-RPC id as MCP has it: a string or an integer (never a bool, a float, null)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def _problem(value: object, unit: str) -> str | None:
    if isinstance(value, list):
        # MCP 2025-06-18 dropped batches (2025-03-26 allowed them) and the SDK never read
        # one: JSON-RPC's answer to a batch that is not served is one Invalid Request.
        return f"JSON-RPC batches are not supported: send one message per {unit}"
    if not isinstance(value, dict):
        return f"not a JSON-RPC message: expected one JSON object, got {_kind(value)}"
    if value.get("jsonrpc") != "2.0":
        return 'not a JSON-RPC 2.0 message: "jsonrpc" must be "2.0"'
    if "method" in value:
        if not isinstance(value["method"], str):
            return 'not a JSON-RPC request: "method" must be a string'
        if "id" in value and not is_request_id(value["id"]):
            return 'not a JSON-RPC request: "id" must be a string or an integer'
        if value.get("params") is not None and not isinstance(value["params"], dict):
            return 'not an MCP request: "params" must be an object'
        return None
    if "result" in value or "error" in value:
        try:  # a response to one of the server's requests: the SDK's own model says
            types.jsonrpc_message_adapter.validate_python(value, by_name=False)
        except ValidationError:
            return (
                'not a JSON-RPC response: it needs an "id" and a "result" object, or an '
                '"error" object with "code" and "message"'
            )
        return None
    return 'not a JSON-RPC message: a request has a "method", a response a "result" or "error"'


def invalid_request(value: Any, *, unit: str) -> types.JSONRPCError | None:
    """The Invalid Request answer to ``value`` (decoded JSON), or None when it is one
    JSON-RPC message whose envelope the SDK reads. ``unit``: what carries one message on
    this transport ("line", "POST"), for the batch's answer."""
    problem = _problem(value, unit)
    if problem is None:
        return None
    request_id = None
    if isinstance(value, dict) and "method" in value and is_request_id(value.get("id")):
        request_id = value["id"]
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(code=types.INVALID_REQUEST, message=problem),
    )


def answer_refused(exc: Exception) -> SessionMessage | None:
    """A SessionMessage answering the line behind ``exc`` (a pydantic ValidationError of
    the SDK's reader), or None when nothing can be answered.

    * JSON that pydantic-core cannot read (its one error carries the line as its input):
      a parse error under the request's id; None without one (a notification, a response);
    * text that is not JSON at all (trailing text after the object, half of a request
      cut by a raw newline): :func:`parse_error`'s answer, under the id its first members
      show, else id null (JSON-RPC 2.0 §5.1); an empty line is no message and gets none;
    * JSON nested deeper than Python's parser reads too: :func:`deep_parse_error`'s
      answer (under the id read before the deep value, else id null);
    * JSON that is not one JSON-RPC message (a batch, ``3``, ``{"hello": 1}``):
      :func:`invalid_request`'s answer.
    """
    if not isinstance(exc, ValidationError) or not exc.errors():
        return None
    errors = exc.errors()
    first = errors[0]
    if first["type"] != "json_invalid":
        value = _decoded(errors)
        answer = None if value is _UNSEEN else invalid_request(value, unit="line")
        if answer is None:  # the SDK refused what the check passes (or it saw nothing)
            answer = types.JSONRPCError(
                jsonrpc="2.0",
                id=None,
                error=types.ErrorData(
                    code=types.INVALID_REQUEST, message="not a valid JSON-RPC message"
                ),
            )
        return SessionMessage(answer)
    line = first.get("input")
    if not isinstance(line, str):
        return None
    try:
        # Without its line end: a request cut by a raw newline is then reported as the
        # unterminated string it is, not as a control character.
        message = json.loads(line.rstrip("\r\n"))
    except RecursionError:
        # Nested deeper than the interpreter's stack (past ~1,000 levels; pydantic-core
        # stops at 200). It must not escape (it ended the stdio server), and its client
        # waits for an answer: a parse error, under the id read before the deep value.
        deep = deep_parse_error(line)
        return None if deep is None else SessionMessage(deep)
    except ValueError as not_json:
        # Not JSON (trailing text after the object, half of a request cut by a raw
        # newline): JSON-RPC 2.0 §5.1's parse error. It was left unanswered, and a client
        # whose request it was waited for ever.
        if not line.strip():
            return None  # an empty line carries no message: nothing to answer
        return SessionMessage(parse_error(line, f"not one JSON value ({not_json})"))
    if not isinstance(message, dict) or "method" not in message:
        return None  # a notification or a response: nothing to answer
    request_id = message.get("id")
    if not is_request_id(request_id):
        return None
    if isinstance(request_id, str) and not _is_text(request_id):
        return None  # the answer could not carry it either
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(
            code=types.PARSE_ERROR,
            message=f"request {request_id!r} could not be read: {first.get('msg', exc)}",
        ),
    )
    return SessionMessage(error)


def leading_members(text: str | bytes | bytearray) -> tuple[dict[str, Any], str | None]:
    """The scalar members of the JSON object ``text`` that come before its first member
    whose value is an object or an array, and that member's name (None when the scan ended
    otherwise: the object's end, text that is not JSON, or :data:`SCAN_CHARS` read).

    Why: a message nested too deep to parse still says, in its first members, whether it
    is a request and under which id (``{"jsonrpc":"2.0","id":7,"method":...,"params":[[[``).
    Only the first :data:`SCAN_CHARS` are looked at, one token at a time, without
    recursion; a member cut by that bound is left out (``"id":12`` of ``"id":1234``), and
    of a name given twice the later value wins, as in a parser. Bytes are UTF-8 (invalid
    UTF-8 ends the scan). Hazard: the text is a peer's; it is only tokenized.
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = codecs.getincrementaldecoder("utf-8")().decode(bytes(text[:SCAN_CHARS]))
        except UnicodeDecodeError:
            return {}, None
    text = text[:SCAN_CHARS]
    members: dict[str, Any] = {}
    pos = _skip_ws(text, 0)
    if not text.startswith("{", pos):
        return members, None
    pos += 1
    try:
        while True:
            pos = _skip_ws(text, pos)
            if not text.startswith('"', pos):
                return members, None  # the object's end, or not JSON
            name, pos = scanstring(text, pos + 1, True)
            pos = _skip_ws(text, pos)
            if not text.startswith(":", pos):
                return members, None
            pos = _skip_ws(text, pos + 1)
            if text.startswith(("{", "["), pos):
                return members, name
            if text.startswith('"', pos):
                value, pos = scanstring(text, pos + 1, True)
            else:
                scalar = _SCALAR.match(text, pos)
                if scalar is None:
                    return members, None
                value, pos = json.loads(scalar.group()), scalar.end()
            pos = _skip_ws(text, pos)
            if not text.startswith((",", "}"), pos):
                return members, None  # cut by the bound, or not JSON: not taken
            members[name] = value
            if text.startswith("}", pos):
                return members, None
            pos += 1
    except ValueError:  # a string that does not end within the bound, a bad escape
        return members, None


def _skip_ws(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return pos if match is None else match.end()


def deep_parse_error(text: str | bytes | bytearray) -> types.JSONRPCError | None:
    """The parse error (-32700) answering ``text``, a message nested deeper than the SDK's
    parser reads (pydantic-core: 200 levels), or None for a response, which is never
    answered.

    Its id: the request's, read by ``json`` where Python's stack allows (to ~1,000
    levels), else by :func:`leading_members` when the members before the deep value show
    a request (a ``method`` string, or a ``params`` value, beside a valid id); null when
    neither can tell (JSON-RPC 2.0 §5: an id that cannot be read is null)."""
    try:
        value = json.loads(text.decode("utf-8") if isinstance(text, (bytes, bytearray)) else text)
    except RecursionError:
        value = _leading(text)
    except ValueError:  # not JSON (or not UTF-8) besides: no member can be trusted
        value = {}
    if not isinstance(value, dict):
        value = {}
    if "result" in value or "error" in value:
        return None
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=_request_id(value),
        error=types.ErrorData(
            code=types.PARSE_ERROR, message="Parse error: the message is nested too deeply"
        ),
    )


def parse_error(text: str | bytes | bytearray, problem: str) -> types.JSONRPCError:
    """The parse error (-32700) answering ``text``, a message that cannot be read at all
    (not JSON, not UTF-8), ``problem`` saying why. Its id is the request's when the
    members before anything unreadable show one (:func:`leading_members`: a ``method``
    string, or a ``params`` value, beside a valid id), else null (JSON-RPC 2.0 §5: an id
    that cannot be read is null). Unlike :func:`deep_parse_error` it always answers: what
    the text was meant to be is not known."""
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id_at_start(text),
        error=types.ErrorData(code=types.PARSE_ERROR, message=f"Parse error: {problem}"),
    )


def request_id_at_start(text: str | bytes | bytearray) -> str | int | None:
    """The request id the first members of ``text`` show (:func:`leading_members`), or
    None: for an answer to a message that is not read whole (over-long)."""
    return _request_id(_leading(text))


def _leading(text: str | bytes | bytearray) -> dict[str, Any]:
    """:func:`leading_members` of ``text``, the container it stopped in marked present
    (``...``: present, not read)."""
    members, container = leading_members(text)
    if container is not None:
        members[container] = ...
    return members


def _request_id(value: dict[str, Any]) -> str | int | None:
    """The id of the request ``value`` (its members, those read) shows, else None: a
    ``method`` string or a ``params`` member beside an id MCP allows, which the answer
    can carry (a lone surrogate cannot be sent back)."""
    request_id = value.get("id")
    is_request = isinstance(value.get("method"), str) or "params" in value
    if "result" in value or "error" in value or not is_request:
        return None
    if not is_request_id(request_id):
        return None
    if isinstance(request_id, str) and not _is_text(request_id):
        return None  # the answer could not carry it
    assert isinstance(request_id, (str, int))
    return request_id


_UNSEEN = object()


def _decoded(errors: list[Any]) -> Any:
    """The decoded line, as the SDK's union validation hands it to its errors: whole at
    the root of a union member (a value that is no object), or as the input of a member's
    missing field (an object); ``_UNSEEN`` when every error is deeper (an object with all
    the fields, of the wrong types)."""
    for error in errors:
        loc = error.get("loc", ())
        if len(loc) == 1 or (len(loc) == 2 and error.get("type") == "missing"):
            return error.get("input")
    return _UNSEEN


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
