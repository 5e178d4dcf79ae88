"""The web page's API, in process (Starlette's TestClient): the token, streamed turns, tool calls,
approvals, the trace tree, and every kind of bad input — each refused with one line, running
nothing and storing nothing."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from typing import Any

import pytest
from starlette.testclient import TestClient

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    BaseAdvisor,
    ChainConfigurationError,
    ChatClient,
    ChatResponse,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ModelError,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.model import ChatResponseMetadata, Generation, Usage
from advisorchain.testing import FunctionChatModel, ScriptedChatModel
from advisorchain.web import create_app
from tests.web.web_helpers import AUTH, TOKEN, agent, asks, events, named, ran


@pytest.fixture(autouse=True)
def _no_calls_yet() -> None:
    ran.clear()


def _app(model: Any, **kwargs: Any) -> tuple[TestClient, Any]:
    client, memory = agent(model, **kwargs)
    return TestClient(create_app(client, token=TOKEN)), memory


def _open(http: TestClient, name: str | None = None) -> str:
    response = http.post("/api/conversations", headers=AUTH, json={"id": name} if name else None)
    assert response.status_code == 201
    return str(response.json()["id"])


def _turn(http: TestClient, conversation: str, body: Any) -> list[tuple[str, Any]]:
    response = http.post(f"/api/conversations/{conversation}/turns", headers=AUTH, json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return events(response.text)


# -- the token ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("GET", "/static/app.js"),
        ("GET", "/static/style.css"),
        ("GET", "/api/info"),
        ("GET", "/api/version"),
        ("GET", "/api/conversations"),
        ("POST", "/api/conversations"),
        ("GET", "/api/conversations/c1"),
        ("DELETE", "/api/conversations/c1"),
        ("POST", "/api/conversations/c1/turns"),
    ],
)
@pytest.mark.parametrize("given", [{}, {"x-advisorchain-token": "wrong-token-0123456789"}, "query"])
def test_a_request_without_the_token_is_refused_and_runs_nothing(method: str, path: str, given: Any) -> None:
    model = ScriptedChatModel(["never"])
    http, memory = _app(model)
    memory.add("c1", [UserMessage("hi"), AssistantMessage("hello")])
    url = f"{path}?token=not-the-token-0123456789" if given == "query" else path
    headers = {} if given == "query" else given
    response = http.request(method, url, headers=headers, json={"text": "hi"})
    assert response.status_code == 403
    assert "token" in response.json()["error"]
    assert model.prompts == []
    assert [m.text for m in memory.get("c1")] == ["hi", "hello"]


def test_the_token_is_taken_from_the_url_or_the_header() -> None:
    http, _ = _app(ScriptedChatModel([]))
    assert http.get(f"/api/info?token={TOKEN}").status_code == 200
    assert http.get("/api/info", headers=AUTH).status_code == 200


def test_a_random_token_is_made_when_none_is_given() -> None:
    first = create_app(ChatClient(ScriptedChatModel([])))
    second = create_app(ChatClient(ScriptedChatModel([])))
    assert len(first.state.token) >= 24 and first.state.token != second.state.token
    http = TestClient(first)
    assert http.get("/api/info").status_code == 403
    assert http.get("/api/info", headers={"x-advisorchain-token": first.state.token}).status_code == 200


@pytest.mark.parametrize("token", ["", "two words", "bad token\n0123456789", 42])
def test_an_empty_spaced_or_unprintable_token_is_refused(token: object) -> None:
    with pytest.raises(ValueError, match="printable characters without spaces"):
        create_app(ChatClient(ScriptedChatModel([])), token=token)  # type: ignore[arg-type]


def test_a_token_of_the_callers_own_is_the_one_every_request_must_carry() -> None:
    app = create_app(ChatClient(ScriptedChatModel([])), token="s3cret")
    http = TestClient(app)
    assert app.state.token == "s3cret"
    assert http.get("/api/info", headers={"x-advisorchain-token": "wrong"}).status_code == 403
    assert http.get("/api/info", headers={"x-advisorchain-token": "s3cret"}).status_code == 200


def test_only_a_chat_client_is_served() -> None:
    with pytest.raises(TypeError, match="ChatClient"):
        create_app(ScriptedChatModel([]))  # type: ignore[arg-type]


# -- the page's files --------------------------------------------------------------------------------


def test_the_page_links_its_files_with_the_token_and_needs_nothing_from_the_network() -> None:
    http, _ = _app(ScriptedChatModel([]))
    page = http.get(f"/?token={TOKEN}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f'static/app.js?token={TOKEN}"' in page.text
    assert f'static/style.css?token={TOKEN}"' in page.text
    script = http.get(f"/static/app.js?token={TOKEN}")
    style = http.get(f"/static/style.css?token={TOKEN}")
    assert "javascript" in script.headers["content-type"] and "css" in style.headers["content-type"]
    for text in (page.text, script.text, style.text):  # no CDN, no web font, nothing remote
        assert "http://" not in text and "https://" not in text and "//cdn" not in text
    assert "innerHTML" not in script.text  # every text is shown as text


def test_a_token_with_markup_is_escaped_in_the_page() -> None:
    token = 'tok"><script>alert(1)</script>'
    http = TestClient(create_app(ChatClient(ScriptedChatModel([])), token=token))
    page = http.get("/", headers={"x-advisorchain-token": token})
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text


# -- info ----------------------------------------------------------------------------------------------


def test_info_says_a_scripted_model_plays_the_llm() -> None:
    http, _ = _app(ScriptedChatModel([]))
    info = http.get("/api/info", headers=AUTH).json()
    assert info["scripted"] is True and "scripted model" in info["notice"]
    tools = {t["name"]: t["requires_approval"] for t in info["tools"]}
    assert tools == {"get_weather": False, "book": True, "broken": False}


def test_info_names_a_real_model_by_provider_and_name() -> None:
    class Named(FunctionChatModel):
        provider = "openai"
        model_name = "gpt-4o-mini"

    http, _ = _app(Named(lambda prompt: "hi"))
    info = http.get("/api/info", headers=AUTH).json()
    assert info["model"] == "openai:gpt-4o-mini" and info["scripted"] is False and info["notice"] is None


# -- turns -----------------------------------------------------------------------------------------------


def _usage(message: AssistantMessage | str, prompt: int, completion: int) -> ChatResponse:
    output = AssistantMessage(message) if isinstance(message, str) else message
    finish = "tool_calls" if output.tool_calls else "stop"
    return ChatResponse(
        (Generation(output, finish),),
        ChatResponseMetadata(usage=Usage(prompt, completion), finish_reason=finish),
    )


def test_a_question_streams_its_answer_then_ends_with_usage_and_the_trace_tree() -> None:
    model = ScriptedChatModel(
        [
            _usage(asks(("w1", "get_weather", '{"city": "Paris"}'), text="Let me look."), 20, 10),
            _usage("Paris is sunny today.", 60, 12),
        ]
    )
    http, memory = _app(model)
    conversation = _open(http)
    found = _turn(http, conversation, {"text": "Weather in Paris?"})
    names = [name for name, _ in found]
    assert names[0] == "run" and names[-2:] == ["done", "trace"]
    assert "".join(d["text"] for d in named(found, "text")) == "Let me look.Paris is sunny today."
    assert len(named(found, "text")) > 2  # streamed in pieces, not in one block
    done = named(found, "done")[0]
    assert done["finish_reason"] == "stop"
    assert done["usage"] == {"prompt_tokens": 80, "completion_tokens": 22, "total_tokens": 102}
    assert [m.text for m in memory.get(conversation)] == ["Weather in Paris?", "Paris is sunny today."]
    (root,) = named(found, "trace")[0]["tree"]
    assert root["name"] == "advisorchain request" and root["ms"] > 0
    (memory_hop,) = root["children"]
    assert memory_hop["name"] == "advisor MessageChatMemoryAdvisor"
    (loop,) = memory_hop["children"]  # the page's own tool watch is left out of the tree
    assert loop["name"] == "advisor Tool Calling Advisor"
    assert [r["name"] for r in loop["children"]] == ["round 1", "round 2"]
    first, second = (r["children"] for r in loop["children"])
    assert [n["kind"] for n in first] == ["model", "tool"]
    assert first[0]["tokens_in"] == 20 and first[0]["tokens_out"] == 10
    assert first[0]["finish_reasons"] == ["tool_calls"]
    assert first[1]["name"] == "execute_tool get_weather"
    assert first[1]["arguments"] == '{"city": "Paris"}' and first[1]["result"] == "Paris: sunny, 21C"
    assert [n["name"] for n in second] == ["chat scripted"] and second[0]["tokens_in"] == 60


def test_each_tool_call_is_reported_when_it_starts_and_when_it_ends() -> None:
    model = ScriptedChatModel(
        [
            asks(("w1", "get_weather", '{"city": "Oslo"}'), ("w2", "get_weather", '{"city": "Rome"}')),
            "Both sunny.",
        ]
    )
    http, _ = _app(model)
    found = _turn(http, _open(http), {"text": "Oslo and Rome?"})
    tools = [(d["id"], d["state"]) for d in named(found, "tool")]
    assert sorted(tools) == [("w1", "done"), ("w1", "running"), ("w2", "done"), ("w2", "running")]
    for call in ("w1", "w2"):
        assert tools.index((call, "running")) < tools.index((call, "done"))
    done = {d["id"]: d for d in named(found, "tool") if d["state"] == "done"}
    assert done["w2"]["result"] == "Rome: sunny, 21C" and done["w2"]["ms"] >= 0
    order = [name for name, _ in found]
    assert max(i for i, n in enumerate(order) if n == "tool") < order.index("text")


def test_a_tool_that_raises_is_shown_as_its_error_and_the_turn_goes_on() -> None:
    model = ScriptedChatModel([asks(("b1", "broken", '{"x": 7}')), "The tool failed, sorry."])
    http, memory = _app(model)
    conversation = _open(http)
    found = _turn(http, conversation, {"text": "Use the broken tool"})
    failed = [d for d in named(found, "tool") if d["state"] == "error"]
    assert [d["error"] for d in failed] == ["ValueError: boom on 7"]
    assert "Traceback" not in json.dumps(found)
    told = model.prompts[1].instructions[-1]
    assert isinstance(told, ToolResponseMessage) and "boom on 7" in told.responses[0].response_data
    assert named(found, "done")[0]["finish_reason"] == "stop"
    assert [m.text for m in memory.get(conversation)] == ["Use the broken tool", "The tool failed, sorry."]
    view = http.get(f"/api/conversations/{conversation}", headers=AUTH).json()
    steps = view["turns"][0]["steps"]
    assert [s["type"] for s in steps] == ["tool", "text", "run"]
    assert steps[0]["state"] == "error" and steps[0]["error"] == "ValueError: boom on 7"


def test_a_failing_provider_ends_the_turn_with_one_line_and_stores_nothing() -> None:
    model = ScriptedChatModel([ModelError("the provider answered 503: overloaded", status_code=503), "Back."])
    http, memory = _app(model)
    conversation = _open(http)
    found = _turn(http, conversation, {"text": "hello?"})
    assert named(found, "error") == [{"message": "the provider answered 503: overloaded"}]
    assert named(found, "done") == []
    assert named(found, "trace")[0]["tree"][0]["error"] == "ModelError"
    assert memory.get(conversation) == []
    again = _turn(http, conversation, {"text": "hello again"})  # the conversation goes on
    assert "".join(d["text"] for d in named(again, "text")) == "Back."
    assert [m.text for m in memory.get(conversation)] == ["hello again", "Back."]


def test_an_unexpected_failure_is_one_line_with_its_type() -> None:
    def fail(prompt: Any) -> str:
        raise RuntimeError("disk full\n  at line 3")

    http, memory = _app(FunctionChatModel(fail))
    conversation = _open(http)
    found = _turn(http, conversation, {"text": "hi"})
    assert named(found, "error") == [{"message": "RuntimeError: disk full at line 3"}]
    assert memory.get(conversation) == []


# -- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'"text"', "JSON object"),
        (b"{}", "exactly one"),
        (b'{"text": "a", "approvals": {"c": {"approved": true}}}', "exactly one"),
        (b'{"question": "a"}', "exactly one"),
        (b'{"text": ""}', "non-blank"),
        (b'{"text": "   "}', "non-blank"),
        (b'{"text": 5}', "non-blank"),
        (b'{"text": null}', "non-blank"),
        (b'{"approvals": []}', "pending tool-call id"),
        (b'{"approvals": {}}', "pending tool-call id"),
        (b'{"approvals": {"c1": "yes"}}', "approved"),
        (b'{"approvals": {"c1": {"approved": "yes"}}}', "approved"),
        (b'{"approvals": {"c1": {"approved": false, "reason": 5}}}', "reason"),
    ],
)
def test_a_malformed_body_is_refused_with_one_line_and_nothing_runs(body: bytes, says: str) -> None:
    model = ScriptedChatModel(["never"])
    http, memory = _app(model)
    conversation = _open(http)
    response = http.post(
        f"/api/conversations/{conversation}/turns",
        headers={**AUTH, "content-type": "application/json"},
        content=body,
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert says in error and "\n" not in error
    assert model.prompts == [] and memory.get(conversation) == []


def test_a_too_long_question_is_refused() -> None:
    model = ScriptedChatModel(["never"])
    http, _ = _app(model)
    response = http.post(
        f"/api/conversations/{_open(http)}/turns", headers=AUTH, json={"text": "x" * 100_001}
    )
    assert response.status_code == 400 and "at most" in response.json()["error"]
    assert model.prompts == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/conversations/nope"),
        ("DELETE", "/api/conversations/nope"),
        ("POST", "/api/conversations/nope/turns"),
    ],
)
def test_an_unknown_conversation_is_404_and_nothing_runs(method: str, path: str) -> None:
    model = ScriptedChatModel(["never"])
    http, memory = _app(model)
    response = http.request(method, path, headers=AUTH, json={"text": "hi"})
    assert response.status_code == 404
    assert response.json()["error"] == "no conversation 'nope'; pick one from the list or start a new one"
    assert model.prompts == [] and memory.get("nope") == []


@pytest.mark.parametrize("name", [" ", "a" * 201, "tab\there"])
def test_a_conversation_name_that_is_not_an_id_is_refused(name: str) -> None:
    http, _ = _app(ScriptedChatModel([]))
    response = http.post("/api/conversations", headers=AUTH, json={"id": name})
    assert response.status_code == 400 and "not a conversation id" in response.json()["error"]


# -- approvals -------------------------------------------------------------------------------------------


def _waiting(model_tail: list[Any]) -> tuple[TestClient, Any, str, ScriptedChatModel]:
    model = ScriptedChatModel(
        [asks(("b1", "book", '{"place": "Chez Ada"}'), text="I'll book it."), *model_tail]
    )
    http, memory = _app(model)
    conversation = _open(http)
    found = _turn(http, conversation, {"text": "Book Chez Ada"})
    assert named(found, "approval") == [
        {"calls": [{"id": "b1", "name": "book", "arguments": '{"place": "Chez Ada"}'}]}
    ]
    assert named(found, "done")[0]["finish_reason"] == "approvalRequired"
    assert ran == []
    return http, memory, conversation, model


def test_an_approved_call_runs_and_the_run_finishes() -> None:
    http, memory, conversation, _ = _waiting(["Booked at Chez Ada."])
    view = http.get(f"/api/conversations/{conversation}", headers=AUTH).json()
    assert view["pending"] == [{"id": "b1", "name": "book", "arguments": '{"place": "Chez Ada"}'}]
    found = _turn(http, conversation, {"approvals": {"b1": {"approved": True}}})
    assert [(d["id"], d["state"]) for d in named(found, "tool")] == [("b1", "running"), ("b1", "done")]
    assert "".join(d["text"] for d in named(found, "text")) == "Booked at Chez Ada."
    assert ran == ["book Chez Ada"]
    stored = memory.get(conversation)
    assert [type(m).__name__ for m in stored] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
    ]
    view = http.get(f"/api/conversations/{conversation}", headers=AUTH).json()
    assert view["pending"] == []
    (turn,) = view["turns"]
    assert [r["kind"] for r in turn["runs"]] == ["question", "approval"]
    assert [s["type"] for s in turn["steps"]] == ["text", "tool", "run", "text", "run"]
    assert turn["steps"][1]["state"] == "done" and turn["steps"][1]["result"] == "booked Chez Ada"


def test_a_denied_call_does_not_run_and_the_model_gets_the_reason() -> None:
    http, _, conversation, model = _waiting(["All right, no booking."])
    found = _turn(http, conversation, {"approvals": {"b1": {"approved": False, "reason": " too pricey "}}})
    assert ran == []
    assert named(found, "tool") == []
    told = model.prompts[-1].instructions[-1]
    assert isinstance(told, ToolResponseMessage)
    assert told.responses[0].response_data == "Error: the user denied this tool call: too pricey"
    view = http.get(f"/api/conversations/{conversation}", headers=AUTH).json()
    step = next(s for s in view["turns"][0]["steps"] if s["type"] == "tool")
    assert step["state"] == "error" and step["error"] == "the user denied this tool call: too pricey"


def test_a_question_while_a_call_waits_is_refused_until_it_is_decided() -> None:
    http, memory, conversation, model = _waiting([])
    response = http.post(f"/api/conversations/{conversation}/turns", headers=AUTH, json={"text": "and?"})
    assert response.status_code == 409
    assert "waits for a decision on book ('b1')" in response.json()["error"]
    assert len(model.prompts) == 1 and len(memory.get(conversation)) == 2


@pytest.mark.parametrize(
    ("approvals", "says"),
    [
        ({"zz": {"approved": True}}, "no pending tool call 'zz'"),
        ({"b1": {"approved": True}, "zz": {"approved": False}}, "no pending tool call 'zz'"),
    ],
)
def test_decisions_for_calls_that_do_not_wait_are_refused(approvals: Any, says: str) -> None:
    http, _, conversation, model = _waiting([])
    response = http.post(
        f"/api/conversations/{conversation}/turns", headers=AUTH, json={"approvals": approvals}
    )
    assert response.status_code == 400 and says in response.json()["error"]
    assert ran == [] and len(model.prompts) == 1


def test_every_pending_call_needs_a_decision() -> None:
    model = ScriptedChatModel([asks(("b1", "book", '{"place": "A"}'), ("b2", "book", '{"place": "B"}'))])
    http, _ = _app(model)
    conversation = _open(http)
    _turn(http, conversation, {"text": "Book A and B"})
    response = http.post(
        f"/api/conversations/{conversation}/turns",
        headers=AUTH,
        json={"approvals": {"b1": {"approved": True}}},
    )
    assert response.status_code == 400 and "no decision for book ('b2')" in response.json()["error"]
    assert ran == []


def test_decisions_when_nothing_waits_are_refused() -> None:
    model = ScriptedChatModel(["Hi."])
    http, _ = _app(model)
    conversation = _open(http)
    _turn(http, conversation, {"text": "hi"})
    response = http.post(
        f"/api/conversations/{conversation}/turns",
        headers=AUTH,
        json={"approvals": {"b1": {"approved": True}}},
    )
    assert response.status_code == 409 and "waits for no decision" in response.json()["error"]


# -- conversations -----------------------------------------------------------------------------------------


def test_conversations_are_listed_with_their_titles_and_can_be_deleted() -> None:
    model = ScriptedChatModel(["One.", "Two."])
    http, memory = _app(model)
    first, second = _open(http), _open(http, "trip")
    _turn(http, first, {"text": "First question"})
    _turn(http, second, {"text": "Second question"})
    listed = {c["id"]: c for c in http.get("/api/conversations", headers=AUTH).json()["conversations"]}
    assert listed[first]["title"] == "First question" and listed[first]["messages"] == 2
    assert listed["trip"]["title"] == "Second question" and listed["trip"]["waiting"] is False
    version = http.get("/api/version", headers=AUTH).json()["version"]
    assert http.delete("/api/conversations/trip", headers=AUTH).status_code == 204
    assert http.get("/api/version", headers=AUTH).json()["version"] > version
    assert memory.get("trip") == []
    assert http.get("/api/conversations/trip", headers=AUTH).status_code == 404
    assert [c["id"] for c in http.get("/api/conversations", headers=AUTH).json()["conversations"]] == [first]


def test_conversations_stored_before_the_page_started_are_listed_and_continued() -> None:
    memory = MessageWindowChatMemory(max_messages=200)
    memory.add("old", [UserMessage("from the CLI"), AssistantMessage("an answer")])
    model = ScriptedChatModel(["Continued."])
    http, _ = _app(model, memory=memory)
    assert [c["id"] for c in http.get("/api/conversations", headers=AUTH).json()["conversations"]] == ["old"]
    view = http.get("/api/conversations/old", headers=AUTH).json()
    assert [(t["id"], t["question"]) for t in view["turns"]] == [(None, "from the CLI")]
    _turn(http, "old", {"text": "more"})
    assert [m.text for m in model.prompts[0].instructions] == ["from the CLI", "an answer", "more"]


def test_a_stored_question_carries_the_id_that_pairs_it_with_its_runs() -> None:
    http, memory = _app(ScriptedChatModel(["Hi."]))
    conversation = _open(http)
    turn_id = named(_turn(http, conversation, {"text": "hi"}), "run")[0]["turn"]
    assert memory.get(conversation)[0].metadata == {"advisorchain.web.turn": turn_id}
    (turn,) = http.get(f"/api/conversations/{conversation}", headers=AUTH).json()["turns"]
    assert turn["id"] == turn_id and turn["runs"][0]["trace"][0]["name"] == "advisorchain request"


# -- what the chain carries: evaluations, documents, citations, cost ------------------------------------


@dataclasses.dataclass(frozen=True)
class _Document:
    id: str
    text: str
    score: float


class _Carrier(BaseAdvisor):
    """Puts what retrieval and evaluation advisors leave in a response's context."""

    def after(self, response: Any, chain: Any) -> Any:
        return response.copy(
            context={
                **response.context,
                AdvisorParams.EVALUATIONS: ({"passed": True, "score": 0.9, "feedback": "fine"},),
                AdvisorParams.RETRIEVED_DOCUMENTS: (_Document("d1", "Paris is in France.", 0.8),),
                AdvisorParams.CITATIONS: (_Document("d1", "Paris is in France.", 0.8),),
            }
        )


def test_evaluations_documents_and_citations_in_the_context_reach_the_page() -> None:
    memory = MessageWindowChatMemory()
    client = ChatClient(
        ScriptedChatModel(["Paris."]), default_advisors=[MessageChatMemoryAdvisor(memory), _Carrier()]
    )
    http = TestClient(create_app(client, token=TOKEN))
    conversation = _open(http)
    context = named(_turn(http, conversation, {"text": "Where is Paris?"}), "done")[0]["context"]
    assert context["evaluations"] == [{"passed": True, "score": 0.9, "feedback": "fine"}]
    assert context["documents"] == [{"id": "d1", "text": "Paris is in France.", "score": 0.8}]
    assert context["citations"] == context["documents"]
    run = http.get(f"/api/conversations/{conversation}", headers=AUTH).json()["turns"][0]["runs"][0]
    assert run["context"] == context


@dataclasses.dataclass(frozen=True)
class _CostlyUsage(Usage):
    cost: Decimal = Decimal("0.00042")


def test_a_cost_on_the_usage_is_shown_beside_the_tokens() -> None:
    answer = ChatResponse(
        (Generation(AssistantMessage("Hi."), "stop"),),
        ChatResponseMetadata(usage=_CostlyUsage(3, 2), finish_reason="stop"),
    )
    http, _ = _app(ScriptedChatModel([answer]))
    done = named(_turn(http, _open(http), {"text": "hi"}), "done")[0]
    assert done["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "cost": "0.00042"}


# -- which memory ----------------------------------------------------------------------------------------


def test_the_page_uses_the_memory_the_client_keeps() -> None:
    client, memory = agent(ScriptedChatModel(["Hi."]))
    http = TestClient(create_app(client, token=TOKEN))
    _turn(http, _open(http, "c"), {"text": "hi"})
    assert [m.text for m in memory.get("c")] == ["hi", "Hi."]


def test_a_client_without_memory_gets_the_memory_given() -> None:
    memory = MessageWindowChatMemory()
    http = TestClient(create_app(ChatClient(ScriptedChatModel(["Hi."])), memory=memory, token=TOKEN))
    _turn(http, _open(http, "c"), {"text": "hi"})
    assert [m.text for m in memory.get("c")] == ["hi", "Hi."]


def test_a_client_without_memory_and_no_memory_given_keeps_conversations_in_memory() -> None:
    model = ScriptedChatModel(["One.", "Two."])
    http = TestClient(create_app(ChatClient(model), token=TOKEN))
    conversation = _open(http)
    _turn(http, conversation, {"text": "first"})
    _turn(http, conversation, {"text": "second"})
    assert [m.text for m in model.prompts[1].instructions] == ["first", "One.", "second"]


def test_a_memory_other_than_the_clients_own_is_refused() -> None:
    client, _ = agent(ScriptedChatModel([]))
    with pytest.raises(ChainConfigurationError, match="another memory"):
        create_app(client, memory=MessageWindowChatMemory())


# -- hardening (issue 37): token-safe files, bounded bodies, deep JSON ---------------------------------


@pytest.mark.parametrize("path", ["/static/app.js", "/static/style.css", "/static/nope.js", "/"])
def test_every_answer_fetched_with_the_token_in_the_url_is_kept_out_of_caches_and_referers(path: str) -> None:
    http, _ = _app(ScriptedChatModel([]))

    response = http.get(f"{path}?token={TOKEN}")

    assert response.headers["cache-control"] == "no-store"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-content-type-options"] == "nosniff"


def _asgi_post(
    app: Any, path: str, chunks: Any, headers: list[tuple[bytes, bytes]]
) -> tuple[int, bytes, int]:
    """POST ``chunks`` (an iterator of bytes) straight to the ASGI app: the status, the body, and
    how many chunks the app read."""
    import asyncio

    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        chunk = next(chunks, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        read += 1
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"x-advisorchain-token", TOKEN.encode()), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, read


def test_a_chunked_body_past_the_limit_is_refused_without_reading_it_whole() -> None:
    model = ScriptedChatModel(["never"])
    client, _ = agent(model)
    app = create_app(client, token=TOKEN)
    chunk = b" " * 65_536
    chunks = iter([chunk] * 1024)  # 64 MB, no Content-Length: sent chunked

    status, body, read = _asgi_post(
        app,
        "/api/conversations",
        chunks,
        [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
    )

    assert status == 413 and "at most 1000000" in json.loads(body)["error"]
    assert read <= 1_000_000 // len(chunk) + 1  # it stopped at the limit: 16 of 1,024 chunks
    assert model.prompts == []


def test_a_chunked_body_under_the_limit_is_read_whole() -> None:
    client, _ = agent(ScriptedChatModel([]))
    app = create_app(client, token=TOKEN)
    body = json.dumps({"id": "chunked"}).encode()

    status, answer, _ = _asgi_post(app, "/api/conversations", iter([body[:5], body[5:]]), [])

    assert status == 201 and json.loads(answer) == {"id": "chunked"}


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"])
def test_json_nested_100000_deep_is_a_400_not_a_500(body: bytes) -> None:
    model = ScriptedChatModel(["never"])
    http, memory = _app(model)
    conversation = _open(http)

    for path in (f"/api/conversations/{conversation}/turns", "/api/conversations"):
        response = http.post(path, headers={**AUTH, "content-type": "application/json"}, content=body)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert "nests too deep" in error and "\n" not in error
    assert model.prompts == [] and memory.get(conversation) == []
