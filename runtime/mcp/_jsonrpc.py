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

Hazard: the value is the client's; it is only inspected, and nothing of it but a valid id
goes back.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["answer_refused", "invalid_request", "is_request_id"]


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
      a parse error under the request's id; None without one (a notification, a response,
      text that is not JSON at all);
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
        message = json.loads(line)
    except (ValueError, RecursionError):
        # RecursionError: nested deeper than the interpreter's stack (past ~1,000 levels;
        # pydantic-core stops at 200): its id cannot be read, so, like text that is not
        # JSON, it gets no answer. It must not escape: it ended the stdio server.
        return None
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
