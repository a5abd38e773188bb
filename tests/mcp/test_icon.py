"""The server's icon (``runtime.mcp._icon``): in ``serverInfo`` on both transports, as a
``data:`` URI (showing it fetches nothing), an SVG with nothing active in it; and no tool
carries an icon, an external server's included (its URL would be untrusted code's)."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

import mcp_types as types
import pytest

from runtime.backends._mcp_tools import spec_for
from runtime.catalogue import export_tool
from runtime.mcp._icon import SERVER_ICONS, SVG
from runtime.mcp.external import parse_external_servers

_SVG_NS = "{http://www.w3.org/2000/svg}"
_PREFIX = "data:image/svg+xml;base64,"


@pytest.mark.anyio
async def test_server_info_carries_the_icon_and_tools_none(connect: Callable[..., Any]) -> None:
    async with connect() as session:
        info = session.server_info
        assert info is not None and info.icons is not None and len(info.icons) == 1
        icon = info.icons[0]
        assert icon.src.startswith(_PREFIX) and icon.mime_type == "image/svg+xml"
        assert base64.b64decode(icon.src.removeprefix(_PREFIX)).decode() == SVG
        tools = (await session.list_tools()).tools
        assert tools and all(t.icons is None for t in tools)


def test_the_svg_has_nothing_active_in_it() -> None:
    root = ET.fromstring(SVG)
    tags = {element.tag for element in root.iter()}
    assert tags == {f"{_SVG_NS}svg", f"{_SVG_NS}path"}
    for element in root.iter():
        for name, value in element.attrib.items():
            assert not name.lower().startswith("on") and "href" not in name.lower(), name
            assert name != "style" and "url(" not in value and "javascript" not in value
    assert all(icon.src.startswith("data:") for icon in SERVER_ICONS)


def test_an_external_tools_icon_is_not_passed_on() -> None:
    ext = parse_external_servers([{"name": "ext", "command": ["x"]}])[0]
    tool = types.Tool(
        name="t",
        input_schema={"type": "object"},
        icons=[types.Icon(src="https://tracker.example/pixel.png")],
    )
    spec = spec_for(ext, "ext", tool)
    assert spec is not None
    definition = export_tool(spec, "mcp")
    assert "icons" not in definition and "tracker" not in str(definition)
