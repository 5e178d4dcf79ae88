"""``advisorchain chat --trace``: the tree of the run's spans after the answer, from a live run against
the scripted OpenAI-compatible server with a tool and memory."""

from __future__ import annotations

import re

from click.testing import CliRunner

from advisorchain.cli import app
from tests.support.openai_server import Received, ScriptedServer, Step, json_reply
from tests.support.payloads import openai_completion


def _tree(server_url: str, *extra: str) -> tuple[str, list[str]]:
    result = CliRunner().invoke(
        app,
        [
            *("chat", "--model", "openai:weather+k3", "--base-url", server_url),
            *("--tools", "cli_tools:get_weather", "--session", "traced", "--trace", "-p", "weather?", *extra),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    return result.stdout, lines[lines.index("trace") :]


def _depth(line: str) -> int:
    return len(re.match(r"^[│├└─ ]*", line).group(0))  # type: ignore[union-attr]


def test_the_trace_lists_both_parallel_tool_calls_in_the_first_round(server_url: str) -> None:
    answer, tree = _tree(server_url)
    assert answer == "w0 w1 w2 \n"
    names = [re.sub(r"^[│├└─ ]*", "", line) for line in tree]
    assert names[1].startswith("advisorchain request")
    assert names[2].startswith("advisor MessageChatMemoryAdvisor")
    assert names[3].startswith("advisor Tool Calling Advisor")
    assert names[4] == "round 1"
    assert names[5].startswith("chat weather+k3") and "tokens 20 in / 10 out" in names[5]
    assert "tool_calls" in names[5]
    tools = names[6:8]  # in either order, each with its own milliseconds
    assert all(re.match(r"execute_tool get_weather  \d+ ms  ", n) for n in tools)
    assert sorted(n.split(" ms  ", 1)[1] for n in tools) == [
        '{"city":"London"} → London: sunny, 21C',
        '{"city":"Paris"} → Paris: sunny, 21C',
    ]
    assert names[8] == "round 2"
    assert names[9].startswith("chat weather+k3") and "stop" in names[9]
    assert len(names) == 10
    # rounds sit under the tool advisor, calls under their round
    assert _depth(tree[4]) > _depth(tree[3]) and _depth(tree[5]) == _depth(tree[6]) > _depth(tree[4])


def test_every_hop_shows_its_milliseconds(server_url: str) -> None:
    _, tree = _tree(server_url, "--no-stream")
    timed = [line for line in tree[1:] if "round" not in line]
    assert timed and all(re.search(r"  \d+ ms", line) for line in timed)


def test_without_trace_no_tree_is_shown(server_url: str) -> None:
    result = CliRunner().invoke(
        app,
        [
            *("chat", "--model", "openai:weather", "--base-url", server_url),
            *("--tools", "cli_tools:get_weather", "-p", "weather?"),
        ],
    )
    assert result.exit_code == 0
    assert "trace" not in result.stderr.splitlines()
    assert "execute_tool" not in result.stderr


def test_a_server_that_reports_no_usage_is_tokens_n_a_in_the_trace_as_under_the_answer(
    held: ScriptedServer,
) -> None:
    def no_usage(request: Received) -> list[Step]:
        body = openai_completion("hello", model=request.body["model"])
        del body["usage"]
        return json_reply(200, body)

    def ask(*extra: str) -> list[str]:
        held.queue(no_usage)
        result = CliRunner().invoke(
            app,
            ["chat", "--model", "openai:m", "--base-url", held.base_url, "--no-stream", "-p", "hi", *extra],
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.stderr
        return result.stderr.splitlines()

    assert ask()[-1] == "tokens n/a · cost n/a"  # the summary under the answer
    traced = ask("--trace")  # with --trace, the tree's request line says it instead
    (request,) = [line for line in traced if "advisorchain request" in line]
    assert re.search(r"advisorchain request  \d+ ms  tokens n/a  cost n/a$", request), request
    assert not any("tokens 0 in" in line for line in traced)
