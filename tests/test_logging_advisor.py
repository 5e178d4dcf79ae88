from __future__ import annotations

import logging

import pytest

from advisorchain import ChatClient, ScriptedChatModel
from advisorchain.advisors.logging import SimpleLoggerAdvisor


def test_logs_the_request_and_the_response_on_call(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="advisorchain.advisors.logging")
    client = ChatClient(ScriptedChatModel(["Paris."]), tool_calling_auto_register=False)
    client.prompt("Capital?").advisors(SimpleLoggerAdvisor()).call().content()
    request_log, response_log = (r.getMessage() for r in caplog.records)
    assert "request: 1 message(s)" in request_log and "Capital?" in request_log
    assert "finish_reason='stop'" in response_log and "Paris." in response_log


def test_logs_a_stream_once_aggregated(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="advisorchain.advisors.logging")
    client = ChatClient(ScriptedChatModel(["a b c"]), tool_calling_auto_register=False)
    assert list(client.prompt("q").advisors(SimpleLoggerAdvisor()).stream().content()) == ["a", " b", " c"]
    assert len(caplog.records) == 2
    assert "text='a b c'" in caplog.records[1].getMessage()


def test_custom_renderings_and_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="advisorchain.advisors.logging")
    advisor = SimpleLoggerAdvisor(
        level=logging.INFO, request_to_string=lambda r: "REQ", response_to_string=lambda r: "RESP"
    )
    ChatClient(ScriptedChatModel(["x"]), tool_calling_auto_register=False).prompt("q").advisors(
        advisor
    ).call().content()
    assert [r.getMessage() for r in caplog.records] == ["REQ", "RESP"]


def test_nothing_is_rendered_when_the_level_is_off(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="advisorchain.advisors.logging")

    def explode(_: object) -> str:
        raise AssertionError("rendered while disabled")

    advisor = SimpleLoggerAdvisor(request_to_string=explode, response_to_string=explode)
    client = ChatClient(ScriptedChatModel(["x"]), tool_calling_auto_register=False)
    assert client.prompt("q").advisors(advisor).call().content() == "x"
