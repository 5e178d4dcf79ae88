"""Against the protocol's own reference server, ``@modelcontextprotocol/server-everything`` (npm, run
with node; ``scripts/test.sh`` installs it into ``.mcp-everything/`` when node is here): task-only
tools are not offered, and its image, resource and structured results reach the model as text and
media, never as base64 text."""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisorchain import AssistantMessage, ChatClient, ScriptedChatModel, ToolCall, ToolResponseMessage
from advisorchain.mcp import McpServerStdio
from advisorchain.tools import tool_callbacks

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "@modelcontextprotocol/server-everything"
SCRIPT = Path(
    os.environ.get("ADVISORCHAIN_MCP_EVERYTHING")
    or ROOT / ".mcp-everything" / "node_modules" / PACKAGE / "dist" / "index.js"
)

pytestmark = [
    pytest.mark.skipif(
        shutil.which("node") is None, reason="node is not installed: server-everything cannot run"
    ),
    pytest.mark.skipif(
        not SCRIPT.exists(),
        reason=f"{PACKAGE} is not installed at {SCRIPT} (scripts/test.sh installs it with npm when node is here)",
    ),
]


@pytest.fixture(scope="module")
def everything() -> Iterator[McpServerStdio]:
    with McpServerStdio("node", [str(SCRIPT), "stdio"], timeout=60) as server:
        yield server


def _tools(server: McpServerStdio) -> dict[str, object]:
    return {cb.definition.name: cb for cb in tool_callbacks(server)}


def test_a_task_only_tool_is_not_offered_and_the_others_are(everything: McpServerStdio) -> None:
    names = set(_tools(everything))

    assert "simulate-research-query" not in names  # execution.taskSupport == "required"
    assert {"echo", "get-tiny-image", "get-resource-links", "get-resource-reference"} <= names


async def test_its_tiny_image_is_media_beside_the_text(everything: McpServerStdio) -> None:
    result = await _tools(everything)["get-tiny-image"].call("{}", None)  # type: ignore[attr-defined]

    assert result == "Here's the image you requested:\nThe image above is the MCP logo."
    (image,) = result.media
    assert image.mime_type == "image/png" and (image.data or b"").startswith(b"\x89PNG")
    assert base64.b64encode(image.data or b"").decode()[:40] not in result


async def test_resource_links_are_their_names_and_uris(everything: McpServerStdio) -> None:
    result = await _tools(everything)["get-resource-links"].call('{"count": 2}', None)  # type: ignore[attr-defined]

    lines = result.splitlines()
    assert lines[0] == "Here are 2 resource links to resources available in this server:"
    assert lines[1].startswith("[resource link: Blob Resource 1 <demo://resource/dynamic/blob/1> (text/plain")
    assert lines[2].startswith("[resource link: Text Resource 2 <demo://resource/dynamic/text/2> (text/plain")


@pytest.mark.parametrize("kind", ["Text", "Blob"])
async def test_an_embedded_text_resource_is_its_text(everything: McpServerStdio, kind: str) -> None:
    result = await _tools(everything)["get-resource-reference"].call(f'{{"resourceType": "{kind}"}}', None)  # type: ignore[attr-defined]

    lines = result.splitlines()
    assert lines[1] == f"[resource demo://resource/dynamic/{kind.lower()}/1]"
    assert lines[2].startswith("Resource 1: This is a ")
    assert result.media == ()


def test_its_image_reaches_the_next_prompt_as_media(everything: McpServerStdio) -> None:
    model = ScriptedChatModel([AssistantMessage(None, [ToolCall("c1", "get-tiny-image", "{}")]), "A logo."])

    assert ChatClient(model).prompt("show the logo").tools(everything).call().content() == "A logo."

    last = model.prompts[1].instructions[-1]
    assert isinstance(last, ToolResponseMessage)
    assert [m.mime_type for m in last.responses[0].media] == ["image/png"]
