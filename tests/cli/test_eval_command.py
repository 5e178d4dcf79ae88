"""``advisorchain eval``: offline on the scripted demo model (the cases file in examples/), against
the scripted OpenAI-compatible server with a loopback judge, JSON output, bad cases files."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from advisorchain.cli import app
from tests.support.openai_server import running_server
from tests.support.scripts import judge

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "eval_cases.yaml"
FINAL = "It is sunny everywhere you asked about."


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def agent(server_url: str, scenario: str = "weather") -> list[str]:
    return ["--model", f"openai:{scenario}", "--base-url", server_url, "--tools", "cli_tools:get_weather"]


@pytest.fixture
def judge_url() -> Iterator[str]:
    with running_server(judge) as server:
        yield server.base_url


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


WEATHER_CASES = """
- name: sunny
  question: What is the weather like in the cities I care about?
  expected: sunny
- name: rainy
  question: Will it rain in the cities I care about?
  expected: rainy
- question: Any weather news?
"""


def test_help_lists_eval() -> None:
    assert "eval" in run("--help").stdout


def test_the_example_cases_run_offline_on_the_demo_model_and_one_fails() -> None:
    result = run("eval", str(EXAMPLE))
    assert result.exit_code == 1, result.stderr
    assert "scripted demo model" in result.stderr
    lines = result.stdout.splitlines()
    for name in ("capital-france", "capital-japan", "boiling-point", "largest-planet"):
        row = next(line for line in lines if name in line)
        assert row.count("✓") == 2, row  # the case and its ExpectedAnswerEvaluator
    hamlet = next(line for line in lines if "hamlet" in line)
    assert "✗" in hamlet and "'Shakespeare'" in result.stdout
    assert lines[-1] == "4 of 5 cases passed"


def test_eval_exits_0_when_every_case_passes_and_writes_json(tmp_path: Path) -> None:
    cases = write(
        tmp_path,
        "cases.json",
        json.dumps([{"name": "fr", "question": "Capital of France?", "expected": "Paris"}]),
    )
    out = tmp_path / "report.json"
    result = run("eval", str(cases), "--json", str(out))
    assert result.exit_code == 0, result.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["passed_all"] == 1
    assert report["rows"][0]["answer"] == "The capital of France is Paris."
    assert report["totals"]["ExpectedAnswerEvaluator"]["pass_rate"] == 1.0


def test_exact_matching_is_asked_with_match_exact(tmp_path: Path) -> None:
    cases = write(tmp_path, "cases.yaml", "- name: fr\n  question: Capital of France?\n  expected: Paris\n")
    assert run("eval", str(cases)).exit_code == 0
    assert run("eval", str(cases), "--match", "exact").exit_code == 1


def test_a_real_agent_with_tools_and_a_judge(server_url: str, judge_url: str, tmp_path: Path) -> None:
    cases = write(tmp_path, "cases.yaml", WEATHER_CASES)
    out = tmp_path / "report.json"
    args = ["eval", str(cases), *agent(server_url), "--judge", "openai:judge", "--judge-base-url", judge_url]
    result = run(*args, "--json", str(out))
    assert result.exit_code == 1, result.stderr  # the 'rainy' case fails
    assert "scripted demo model" not in result.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    rows = {row["case"]["name"]: row for row in report["rows"]}
    assert set(rows) == {"sunny", "rainy", "case-3"}
    assert all(row["answer"] == FINAL and row["error"] is None for row in rows.values())
    assert [rows[n]["results"]["LLMJudgeEvaluator"]["score"] for n in ("sunny", "rainy", "case-3")] == [
        4.0,
        4.0,
        4.0,
    ]
    assert rows["sunny"]["passed"] and not rows["rainy"]["passed"] and rows["case-3"]["passed"]
    assert "ExpectedAnswerEvaluator" not in rows["case-3"]["results"]
    assert rows["sunny"]["usage"]["total_tokens"] > 0  # the agent's tokens, summed over the tool round
    assert report["totals"]["LLMJudgeEvaluator"] == {"pass_rate": 1.0, "mean_score": 4.0, "cases": 3}
    assert report["totals"]["ExpectedAnswerEvaluator"]["pass_rate"] == 0.5
    assert result.stdout.splitlines()[-1] == "2 of 3 cases passed"


def test_a_case_whose_agent_fails_is_a_failed_row_and_the_others_still_run(
    server_url: str, tmp_path: Path
) -> None:
    cases = write(tmp_path, "cases.yaml", WEATHER_CASES)
    result = run("eval", str(cases), *agent(server_url, "no-such-scenario"))
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == "0 of 3 cases passed"
    assert re.search(r"Model\w*Error", result.stdout)  # the typed ModelError of the failure


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("cases.yaml", "question: not a list\n", "write a list of cases"),
        ("cases.yaml", "[]\n", "holds no cases"),
        ("cases.json", '[{"question": ', "not valid JSON"),
        ("cases.yaml", "- {question: q, expect: a}\n", "unknown field(s) 'expect'"),
        ("cases.yaml", "- {name: a}\n", "case 1: case 'a' needs a non-blank str question"),
        ("cases.yaml", "- {question: Is it sunny, expected: yes}\n", "quote it"),
        ("cases.yaml", "- just a string\n", "each case is a mapping"),
        ("cases.yaml", "- {question: q, context: [[1]]}\n", "context"),
    ],
)
def test_a_bad_cases_file_is_one_error_line_naming_the_file(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = write(tmp_path, name, text)
    result = run("eval", str(path))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and lines[0].startswith("error: ") and str(path) in " ".join(result.stderr.split())
    ), result.stderr
    assert message in " ".join(result.stderr.split())


def test_unquoted_numbers_in_yaml_are_read_as_text(tmp_path: Path) -> None:
    path = write(
        tmp_path, "cases.yaml", "- name: 7\n  question: At what temperature does water boil?\n  expected: 100\n"
    )
    result = run("eval", str(path))
    assert result.exit_code == 0, result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base-url", "http://127.0.0.1:9/v1"], "--base-url needs --model"),
        (["--judge-base-url", "http://127.0.0.1:9/v1"], "--judge-base-url needs --judge"),
        (["--judge", "gpt-4o"], "is not provider:name"),
        (["--concurrency", "0"], "--concurrency"),
    ],
)
def test_bad_options_are_usage_errors(args: list[str], message: str) -> None:
    result = run("eval", str(EXAMPLE), *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_judge_without_a_key_or_server_is_one_error_line() -> None:
    result = run("eval", str(EXAMPLE), "--judge", "openai:gpt-4o-mini")
    assert result.exit_code == 1
    assert "OPENAI_API_KEY is not set" in result.stderr
