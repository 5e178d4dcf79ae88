"""The page in a real browser: headless Chromium from the distribution, driven by Playwright, on
``advisorchain web`` as a user starts it (the offline demo agent) and on ``create_app`` for a
failing provider. Type a question and watch the answer stream in, open the trace tree, approve and
deny pending calls, reload, use two tabs, and be refused without the token.

``ADVISORCHAIN_WEB_SCREENSHOT=docs/images/web.png`` makes the approval test save the README's
screenshot there.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisorchain import ModelError
from advisorchain.testing import ScriptedChatModel
from advisorchain.web import create_app
from tests.web.web_helpers import TOKEN, Running, agent, serve, wait_for, web

pytest.importorskip("playwright", reason="the browser tests need Playwright: pip install -e '.[dev]'")
from playwright.sync_api import expect

SCREENSHOT_ENV = "ADVISORCHAIN_WEB_SCREENSHOT"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """``advisorchain web`` with no model: the scripted demo agent, its own sessions store."""
    with web(tmp_path_factory.mktemp("web")) as running:
        yield running


def _open(page: Any, url: str) -> None:
    page.goto(url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def _ask(page: Any, question: str) -> None:
    page.locator("#question").fill(question)
    page.locator("#question").press("Enter")


def _answered(page: Any, count: int) -> Any:
    """The stored turns once ``count`` of them are drawn and no turn is running."""
    turns = page.locator("#turns article.turn:not(.live)")
    expect(turns).to_have_count(count)
    expect(page.locator("#turns article.turn.live")).to_have_count(0)
    return turns


def test_a_question_streams_in_and_its_trace_tree_opens(page: Any, demo: Running) -> None:
    _open(page, demo.url)
    expect(page.locator("#model")).to_contain_text("scripted")
    expect(page.locator("#notice")).to_contain_text("A scripted model plays the LLM")
    page.evaluate(
        """() => {
            window.seen = [];
            new MutationObserver(() => {
                const answer = document.querySelector('.turn.live .answer.streaming');
                if (answer) window.seen.push(answer.textContent);
            }).observe(document.getElementById('turns'), {subtree: true, childList: true, characterData: true});
        }"""
    )
    _ask(page, "Plan a day in Lisbon")
    turn = _answered(page, 1).first
    expect(turn.locator(".message.user")).to_have_text("Plan a day in Lisbon")
    expect(turn.locator(".answer").last).to_contain_text("The weather is sunny, 24°C")
    seen = page.evaluate("window.seen")
    growing = sorted(set(seen), key=len)
    assert len(growing) >= 3, seen  # the answer arrived word by word
    assert all(longer.startswith(shorter) for shorter, longer in itertools.pairwise(growing))

    weather = turn.locator(".tool-call[data-call-id='weather-1']")
    expect(weather.locator(".tool-status")).to_contain_text("✓")
    expect(weather.locator(".tool-result")).to_be_hidden()
    weather.locator("summary").click()
    expect(weather.locator(".tool-result")).to_contain_text("sunny, 24°C")
    expect(weather.locator(".tool-arguments")).to_contain_text('"city": "Lisbon"')

    trace = turn.locator("details.trace")
    expect(trace.locator("ul.tree")).to_be_hidden()
    trace.locator("summary").first.click()
    tree = trace.locator("ul.tree")
    expect(tree).to_be_visible()
    for text in ("advisorchain request", "advisor MessageChatMemoryAdvisor", "advisor Tool Calling Advisor"):
        expect(tree).to_contain_text(text)
    expect(tree.locator(".node.round")).to_have_count(2)
    expect(tree.locator(".node.model")).to_have_count(2)
    expect(tree.locator(".node.model").first).to_contain_text("tokens")
    expect(tree.locator(".node.tool")).to_have_count(2)
    expect(tree.locator(".node.tool", has_text="execute_tool get_weather")).to_contain_text("→ sunny, 24°C")
    expect(tree.locator(".node.request .ms")).to_contain_text("ms")


def test_approving_a_pending_call_finishes_the_run(page: Any, demo: Running, tmp_path: Path) -> None:
    _open(page, demo.base + f"/?token={demo.token}")
    _ask(page, "Plan a day in Lisbon")
    _answered(page, 1)
    page.locator("details.trace > summary").first.click()
    _ask(page, "Book a table at Time Out Market")
    approval = page.locator(".approval")
    expect(approval).to_contain_text("Waiting for your decision")
    expect(approval.locator(".pending-call .tool-name")).to_have_text("book_table")
    expect(page.locator("#send")).to_be_disabled()
    _screenshot(page, tmp_path)
    approval.locator("button.approve").click()
    turns = _answered(page, 2)
    last = turns.last
    expect(last.locator(".answer").last).to_contain_text("confirmed (demo booking #")
    expect(page.locator(".approval")).to_have_count(0)
    expect(last.locator(".tool-call[data-call-id='book-1'] .tool-status")).to_contain_text("✓")
    expect(last.locator(".run-approval")).to_contain_text("resumed after your decision")
    expect(page.locator("#send")).to_be_enabled()


def _screenshot(page: Any, tmp_path: Path) -> None:
    """The README's picture: a turn with its tool calls and its trace tree open, and a call waiting
    for approval."""
    page.locator("#question").blur()
    path = tmp_path / "web.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000
    target = os.environ.get(SCREENSHOT_ENV)
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def test_denying_a_call_with_a_reason_tells_the_model_why(page: Any, demo: Running) -> None:
    _open(page, demo.url)
    page.locator("#new-conversation").click()
    _ask(page, "Book a table at MAAT")
    approval = page.locator(".approval")
    approval.locator("input.reason").fill("too late for dinner")
    approval.locator("button.deny").click()
    turn = _answered(page, 1).first
    expect(turn.locator(".answer").last).to_have_text(
        "All right, I did not book it. (You said: too late for dinner.)"
    )
    card = turn.locator(".tool-call[data-call-id='book-1']")
    expect(card).to_have_class("tool-call state-error")
    card.locator("summary").click()
    expect(card.locator(".tool-error")).to_have_text("the user denied this tool call: too late for dinner")


def test_a_reload_finds_the_conversation(page: Any, demo: Running) -> None:
    _open(page, demo.url)
    page.locator("#new-conversation").click()
    _ask(page, "Plan a day in Porto")
    _answered(page, 1)
    assert page.url.split("#", 1)[1].startswith("c=web-")
    conversation = page.url.split("#c=", 1)[1]
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    turn = _answered(page, 1).first
    expect(turn.locator(".message.user")).to_have_text("Plan a day in Porto")
    expect(turn.locator(".answer").last).to_contain_text("The weather is cloudy, 19°C")
    expect(turn.locator(".tool-call")).to_have_count(2)
    expect(turn.locator("details.trace")).to_have_count(1)
    current = page.locator(f"#conversations li.current[data-id='{conversation}']")
    expect(current.locator(".title")).to_have_text("Plan a day in Porto")


def test_a_failing_tool_is_one_readable_line(page: Any, demo: Running) -> None:
    _open(page, demo.url)
    page.locator("#new-conversation").click()
    _ask(page, "Is flight TP123 on time?")
    turn = _answered(page, 1).first
    card = turn.locator(".tool-call[data-call-id='flight-1']")
    expect(card.locator(".tool-status")).to_contain_text("error")
    card.locator("summary").click()
    expect(card.locator(".tool-error")).to_have_text(
        "ConnectionError: the demo has no flight service to ask about TP123"
    )
    assert "Traceback" not in page.locator("body").inner_text()


def test_a_page_without_the_token_is_refused(page: Any, demo: Running) -> None:
    for path in ("/", "/static/app.js", "/api/conversations"):
        response = page.goto(demo.base + path)
        assert response is not None and response.status == 403
        assert "forbidden" in page.locator("body").inner_text()
    _open(page, demo.url)
    status = page.evaluate("() => fetch('api/info').then(r => r.status)")  # the page's origin, no token
    assert status == 403


def test_two_tabs_on_one_conversation_see_the_same_turns_in_order(page: Any, demo: Running) -> None:
    _open(page, demo.url)
    page.locator("#new-conversation").click()
    _ask(page, "Plan a day in Lisbon")
    _answered(page, 1)
    other = page.context.new_page()
    _open(other, page.url)
    _answered(other, 1)
    _ask(page, "Plan a day in Porto")  # both tabs ask at once: the second waits its turn
    _ask(other, "Book a table at Time Out Market")
    for tab in (page, other):
        expect(tab.locator(".approval")).to_be_visible()
        _answered(tab, 3)
    questions = [
        page.locator("#turns .message.user").all_inner_texts(),
        other.locator("#turns .message.user").all_inner_texts(),
    ]
    assert questions[0] == questions[1]
    assert questions[0][0] == "Plan a day in Lisbon"
    assert sorted(questions[0][1:]) == ["Book a table at Time Out Market", "Plan a day in Porto"]
    other.close()


def test_a_failing_provider_is_one_line_and_the_question_stays_on_the_page(page: Any) -> None:
    client, memory = agent(
        ScriptedChatModel([ModelError("the provider answered 503: overloaded", status_code=503)])
    )
    with serve(create_app(client, token=TOKEN)) as served:
        _open(page, served.page_url())
        _ask(page, "hello?")
        failed = page.locator("#turns article.turn.unstored")
        expect(failed.locator(".error-line")).to_have_text("the provider answered 503: overloaded")
        expect(failed.locator(".message.user")).to_have_text("hello?")
        assert "Traceback" not in page.locator("body").inner_text()
        page.wait_for_timeout(2_000)  # a refresh from the page's poll keeps the failed turn shown
        expect(failed.locator(".error-line")).to_be_visible()
        conversation = page.url.split("#c=", 1)[1]
    assert memory.get(conversation) == []


def test_conversations_are_started_and_deleted_from_the_list(page: Any, demo: Running) -> None:
    _open(page, demo.url)
    page.locator("#new-conversation").click()
    _ask(page, "Plan a day in Porto for deletion")
    _answered(page, 1)
    item = page.locator("#conversations li.current")
    expect(item.locator(".title")).to_have_text("Plan a day in Porto for deletion")
    item.locator("button.delete").click()
    expect(item.locator("button.delete")).to_have_text("delete?")
    item.locator("button.delete").click()
    expect(page.locator("#conversation-title")).to_have_text("New conversation")
    expect(page.locator("#conversations li", has_text="Plan a day in Porto for deletion")).to_have_count(0)


def test_the_demo_offers_questions_to_start_with(page: Any, demo: Running) -> None:
    _open(page, demo.url)
    page.locator("#new-conversation").click()
    page.locator(".examples button.example", has_text="Plan a day in Lisbon").click()
    turn = _answered(page, 1).first
    expect(turn.locator(".message.user")).to_have_text("Plan a day in Lisbon")
    expect(turn.locator(".answer").last).to_contain_text("Museu Calouste Gulbenkian or MAAT")


def test_closing_the_tab_mid_answer_cancels_the_run_and_stores_nothing(page: Any, demo: Running) -> None:
    import httpx2 as httpx

    _open(page, demo.url)
    page.locator("#new-conversation").click()
    _ask(page, "Plan a day in Lisbon")
    expect(page.locator(".turn.live .answer.streaming")).to_be_visible()
    conversation = page.url.split("#c=", 1)[1]
    page.close()
    api = httpx.Client(base_url=demo.base, headers={"x-advisorchain-token": demo.token}, timeout=10)
    wait_for(lambda: not api.get(f"/api/conversations/{conversation}").json()["running"])
    view = api.get(f"/api/conversations/{conversation}").json()
    api.close()
    assert view["turns"] == []  # neither the question nor half an answer was stored
