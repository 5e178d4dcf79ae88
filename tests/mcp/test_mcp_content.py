"""MCP results of every kind, from the project's scripted server: images and audio reach the model as
media (in the tool result for Anthropic, in a user message after the tool responses for the OpenAI
APIs, a one-line note where a model takes none), resources as text, nothing as base64 text; a result
over ``max_result_bytes`` is a clear error and the session stays usable; a storm of list_changed
notifications costs a couple of refreshes, not one each."""

from __future__ import annotations

import base64
import json
import sys
import time
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    ChatClient,
    Media,
    ScriptedChatModel,
    ToolCall,
    ToolResponseMessage,
)
from advisorchain.mcp import McpServerStdio, McpToolError
from advisorchain.replay import Cassette, replay_anthropic_client, replay_openai_client
from advisorchain.tools import tool_callbacks
from tests.support.mcp_helpers import stdio_args
from tests.support.mcp_server import PDF, PNG, WAV

PNG_B64 = base64.b64encode(PNG).decode()


def _tool(server: McpServerStdio, name: str) -> Any:
    return {cb.definition.name: cb for cb in tool_callbacks(server)}[name]


# -- what a result becomes -------------------------------------------------------------------------


async def test_an_image_beside_text_is_media_and_the_text_keeps_its_order(
    scripted_server: McpServerStdio,
) -> None:
    result = await _tool(scripted_server, "picture").call("{}", None)

    assert result == "Here is the chart:\nIt shows growth."
    assert result.media == (Media("image/png", data=PNG),)


async def test_an_image_only_result_is_never_base64_text(scripted_server: McpServerStdio) -> None:
    result = await _tool(scripted_server, "image_only").call('{"kilobytes": 300}', None)

    assert result == ""
    assert len(result.media) == 1 and len(result.media[0].data or b"") == 300 * 1024


async def test_an_image_mirrored_in_structured_content_is_media_not_base64_text(
    scripted_server: McpServerStdio,
) -> None:
    """The shape of @modelcontextprotocol/server-filesystem's read_media_file: one image block, and
    ``structuredContent`` holding the same block again."""
    result = await _tool(scripted_server, "media_file").call("{}", None)

    assert (result, result.media) == ("", (Media("image/png", data=PNG),))


async def test_an_image_inside_structured_content_is_media_and_a_placeholder_in_its_json(
    scripted_server: McpServerStdio,
) -> None:
    result = await _tool(scripted_server, "structured_media").call("{}", None)

    assert json.loads(result) == {"name": "chart.png", "preview": "[image (image/png), attached]"}
    assert result.media == (Media("image/png", data=PNG),)
    assert PNG_B64 not in result


async def test_audio_is_media(scripted_server: McpServerStdio) -> None:
    result = await _tool(scripted_server, "sound").call("{}", None)

    assert (result, result.media) == ("Listen:", (Media("audio/wav", data=WAV),))


async def test_resources_are_text_links_and_media_and_nothing_is_dropped(
    scripted_server: McpServerStdio,
) -> None:
    result = await _tool(scripted_server, "resources").call("{}", None)

    assert result.splitlines() == [
        "[resource link: Design notes <file:///docs/design.md> (text/markdown)]",
        "[resource memo://1]",
        "The memo text.",
        "[resource memo://2]",
        "A text blob.",
        "[resource file:///report.pdf (application/pdf), attached]",
        "[resource file:///data.bin (application/octet-stream, about 300 bytes): not shown]",
    ]
    assert result.media == (Media("application/pdf", data=PDF),)


async def test_a_resource_only_result_is_its_text_not_an_empty_answer(
    scripted_server: McpServerStdio,
) -> None:
    result = await _tool(scripted_server, "resource_only").call("{}", None)

    assert result == "[resource memo://only]\nOnly this."


def test_the_tool_loop_keeps_the_media_in_the_tool_response(scripted_server: McpServerStdio) -> None:
    model = ScriptedChatModel([AssistantMessage(None, [ToolCall("c1", "picture", "{}")]), "A chart."])

    ChatClient(model).prompt("chart?").tools(scripted_server).call().content()

    last = model.prompts[1].instructions[-1]
    assert isinstance(last, ToolResponseMessage)
    (response,) = last.responses
    assert (response.response_data, response.media) == (
        "Here is the chart:\nIt shows growth.",
        (Media("image/png", data=PNG),),
    )


# -- what each provider is sent --------------------------------------------------------------------

_CHAT_CALL = {
    "id": "c1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "TOOL", "arguments": "{}"}}
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
}
_CHAT_DONE = {
    "id": "c2",
    "object": "chat.completion",
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Seen."}, "finish_reason": "stop"}],
}
_ANTHROPIC_CALL = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "TOOL", "input": {}}],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
_ANTHROPIC_DONE = {
    **_ANTHROPIC_CALL,
    "content": [{"type": "text", "text": "Seen."}],
    "stop_reason": "end_turn",
}
_RESPONSES_CALL = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "m",
    "output": [
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "TOOL", "arguments": "{}"}
    ],
}
_RESPONSES_DONE = {
    **_RESPONSES_CALL,
    "output": [
        {
            "type": "message",
            "id": "m1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Seen."}],
        }
    ],
}


def _cassette(
    path: str, first: dict[str, Any], second: dict[str, Any], tool: str, arguments: dict[str, Any]
) -> Cassette:
    call = json.loads(
        json.dumps(first).replace("TOOL", tool).replace('"{}"', json.dumps(json.dumps(arguments)))
    )
    if path == "/v1/messages":
        call["content"][0]["input"] = arguments
    return Cassette(
        [
            {
                "request": {"method": "POST", "path": path},
                "response": {"status": 200, "content_type": "application/json", "json": r},
            }
            for r in (call, second)
        ],
        host="api.example.com",
    )


def _second_body(
    kind: str, tool: str, server: McpServerStdio, arguments: dict[str, Any] | None = None
) -> Any:
    from advisorchain.models.anthropic import AnthropicChatModel
    from advisorchain.models.openai import OpenAIChatModel, OpenAIResponsesChatModel

    if kind == "anthropic":
        cassette = _cassette("/v1/messages", _ANTHROPIC_CALL, _ANTHROPIC_DONE, tool, arguments or {})
        model: Any = AnthropicChatModel("m", client=replay_anthropic_client(cassette))
    elif kind == "chat":
        cassette = _cassette("/v1/chat/completions", _CHAT_CALL, _CHAT_DONE, tool, arguments or {})
        model = OpenAIChatModel("m", client=replay_openai_client(cassette))
    else:
        cassette = _cassette("/v1/responses", _RESPONSES_CALL, _RESPONSES_DONE, tool, arguments or {})
        model = OpenAIResponsesChatModel("m", client=replay_openai_client(cassette))
    assert ChatClient(model).prompt("show me").tools(server).call().content() == "Seen."
    cassette.assert_exhausted()
    return cassette.requests[1].body


def test_anthropic_gets_the_image_inside_the_tool_result(scripted_server: McpServerStdio) -> None:
    body = _second_body("anthropic", "picture", scripted_server)

    (result,) = body["messages"][-1]["content"]
    assert result["type"] == "tool_result"
    assert result["content"] == [
        {"type": "text", "text": "Here is the chart:\nIt shows growth."},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
    ]


@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_the_openai_apis_get_the_image_in_a_user_message_naming_the_tool_call(
    scripted_server: McpServerStdio, kind: str
) -> None:
    body = _second_body(kind, "picture", scripted_server)

    history = body["messages"] if kind == "chat" else body["input"]
    tool_output, attachments = history[-2], history[-1]
    if kind == "chat":
        assert tool_output == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "Here is the chart:\nIt shows growth.",
        }
        image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}
        heading = {"type": "text", "text": "Attachments returned by tool call call_1 (picture):"}
    else:
        assert tool_output == {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": "Here is the chart:\nIt shows growth.",
        }
        image = {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_B64}", "detail": "auto"}
        heading = {"type": "input_text", "text": "Attachments returned by tool call call_1 (picture):"}
    assert attachments == {"role": "user", "content": [heading, image]}


@pytest.mark.parametrize("kind", ["anthropic", "responses"])
def test_audio_a_model_takes_nowhere_is_one_line_naming_type_and_size(
    scripted_server: McpServerStdio, kind: str
) -> None:
    body = _second_body(kind, "sound", scripted_server)

    note = f"[audio/wav, {len(WAV):,} bytes: not shown, this model takes no audio/wav"
    sent = json.dumps(body)
    assert note in sent
    assert base64.b64encode(WAV).decode() not in sent


def test_a_300_kb_image_only_result_reaches_the_model_as_an_image_not_as_text(
    scripted_server: McpServerStdio,
) -> None:
    body = _second_body("chat", "image_only", scripted_server, {"kilobytes": 300})

    tool_output, attachments = body["messages"][-2:]
    assert tool_output["content"] == f"[the result is attached: image/png, {300 * 1024:,} bytes]"
    assert attachments["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


# -- limits ----------------------------------------------------------------------------------------


async def test_a_result_over_max_result_bytes_is_an_error_and_the_session_stays_usable(
    no_leftovers: None,
) -> None:
    async with McpServerStdio(
        sys.executable, stdio_args("scripted"), max_result_bytes=1_000_000, timeout=30
    ) as server:
        started = time.monotonic()
        # (MCPServer sends a str result twice: as text and as structured content.)
        with pytest.raises(McpToolError, match=r"is 10,000,014 bytes, over max_result_bytes=1,000,000"):
            await _tool(server, "big").call('{"size": 5000000}', None)
        assert await _tool(server, "echo").call('{"text": "still here"}', None) == "still here"
        assert time.monotonic() - started < 20
        assert await _tool(server, "big").call('{"size": 1000}', None) == "x" * 1000


def test_the_model_is_told_the_size_and_the_limit(scripted_server: McpServerStdio) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "big", '{"size": 1000001}')]), "Too big."]
    )

    ChatClient(model).prompt("all of it").tools(scripted_server).call().content()

    last = model.prompts[1].instructions[-1]
    assert isinstance(last, ToolResponseMessage)
    assert last.responses[0].response_data.startswith(
        "Error: the result of tool 'big' of MCP server 'scripted' is 2,000,016 bytes, "
        "over max_result_bytes=1,000,000; ask for less"
    )


@pytest.mark.parametrize("value", [0, -1, 1.5, "big", True])
def test_a_bad_max_result_bytes_is_refused_naming_it(value: object) -> None:
    with pytest.raises(ValueError, match="max_result_bytes must be an int"):
        McpServerStdio(sys.executable, stdio_args("scripted"), max_result_bytes=value)  # type: ignore[arg-type]


async def test_a_storm_of_list_changed_notifications_is_coalesced(no_leftovers: None) -> None:
    async with McpServerStdio(sys.executable, stdio_args("scripted"), timeout=60) as server:
        connection = server._connection
        assert connection is not None
        before = connection.lists
        assert await _tool(server, "storm").call('{"times": 5000}', None) == "sent 5000"
        assert await _tool(server, "echo").call('{"text": "after"}', None) == "after"
        # One refresh in flight and at most one queued (after a burst settles): a few, not one per
        # notification.
        assert 1 <= connection.lists - before < 500
