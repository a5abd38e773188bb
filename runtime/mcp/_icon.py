"""The server's icon (``serverInfo.icons``, MCP 2025-11-25): inline, as a ``data:`` URI.

Why inline: an ``http(s):`` icon makes every client that shows the server fetch a URL
(a request to a host of our choosing, from wherever the client runs); a ``data:`` URI is
the image itself. Why no tool icons: a tools/list is sent to every session and again on
every list change, for the model as much as for a person, and an icon per tool would
say nothing its title does not. External servers' tool icons are never shown (a URL of
untrusted code's choosing): the proxy's tool specs carry none.

The image is a shield with a tick, plain SVG: two paths and no script, links or styles
(clients are told to take care with SVG; ``tests/mcp/test_icon.py`` pins that there is
nothing in it to take care of).
"""

from __future__ import annotations

import base64

import mcp_types as types

__all__ = ["SERVER_ICONS", "SVG"]

SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64">'
    '<path d="M32 4 8 12v18c0 15 10 25 24 30 14-5 24-15 24-30V12z" fill="#2f6f4f"/>'
    '<path d="m21 32 8 8 15-16" fill="none" stroke="#fff" stroke-width="6" '
    'stroke-linecap="round" stroke-linejoin="round"/>'
    "</svg>"
)

SERVER_ICONS = [
    types.Icon(
        src="data:image/svg+xml;base64," + base64.b64encode(SVG.encode()).decode("ascii"),
        mime_type="image/svg+xml",
        sizes=["any"],
    )
]
