"""``advisorchain serve --protocol agui|a2a|openai|mcp``: the agent ``chat`` builds (the scripted
demo model here), a printed token or one from ``--token-env``, ``--no-token`` on loopback only."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai

COMMAND = [sys.executable, "-m", "advisorchain.cli", "serve"]


@dataclass
class Running:
    process: subprocess.Popen[str]
    url: str
    token: str | None


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "ADVISORCHAIN"))}
    return {**env, "ADVISORCHAIN_DATA_DIR": str(tmp_path / "data"), "NO_COLOR": "1", "COLUMNS": "200", **more}


@contextmanager
def serving(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Running]:
    process = subprocess.Popen(
        [*COMMAND, "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or _env(tmp_path),
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"(http://\S+)", first)
        assert found, f"no URL in {first!r}; stderr: {process.stderr.read() if process.stderr else ''}"
        second = process.stdout.readline()
        token = re.search(r"token: (\S+)", second)
        yield Running(process, found.group(1), token.group(1) if token else None)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_the_openai_protocol_prints_a_token_that_the_openai_sdk_uses(tmp_path: Path) -> None:
    with serving(tmp_path, "--protocol", "openai") as running:
        assert running.url.endswith("/v1") and running.token
        sdk = openai.OpenAI(base_url=running.url, api_key=running.token, max_retries=0)
        answer = sdk.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}])
        assert answer.choices[0].message.content
        refused = httpx.get(running.url + "/models", headers={"Authorization": "Bearer wrong"})
        assert refused.status_code == 401


def test_the_token_comes_from_the_named_variable(tmp_path: Path) -> None:
    env = _env(tmp_path, MY_SERVE_TOKEN="from-the-env")
    with serving(tmp_path, "--protocol", "a2a", "--token-env", "MY_SERVE_TOKEN", env=env) as running:
        assert running.token == "from-the-env"
        card = httpx.get(running.url.rstrip("/") + "/.well-known/agent-card.json").json()
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"


def test_no_token_serves_on_loopback(tmp_path: Path) -> None:
    with serving(tmp_path, "--protocol", "agui", "--no-token") as running:
        assert running.token is None
        body = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hello"}]}
        with httpx.stream("POST", running.url, json=body, timeout=30) as response:
            lines = [line for line in response.iter_lines() if line.startswith("data: ")]
        assert '"RUN_FINISHED"' in lines[-1]


def test_the_mcp_protocol_wants_the_token(tmp_path: Path) -> None:
    with serving(tmp_path, "--protocol", "mcp") as running:
        assert running.url.endswith("/mcp")
        assert httpx.post(running.url, json={}).status_code == 401


def test_no_token_on_another_host_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [*COMMAND, "--protocol", "openai", "--host", "0.0.0.0", "--no-token"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
    )
    assert done.returncode == 2 and "--no-token" in done.stderr


def test_an_unset_token_variable_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [*COMMAND, "--protocol", "openai", "--token-env", "NOT_SET_ANYWHERE"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
    )
    assert done.returncode == 2 and "NOT_SET_ANYWHERE" in done.stderr


def test_a_session_is_refused_since_each_request_names_its_conversation(tmp_path: Path) -> None:
    done = subprocess.run(
        [*COMMAND, "--protocol", "openai", "--session", "mine"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
    )
    assert done.returncode == 2 and "--session" in done.stderr


def test_serve_takes_the_agents_file_and_refuses_a_bad_one_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents:\n  - name: a\n    handoffs: [b]\n")
    result = subprocess.run(
        [*COMMAND, "--port", "0", "--protocol", "openai", "--agents", str(bad)],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if "--agents" in line]
    assert len(lines) == 1 and "hands off to 'b', which the file does not define" in lines[0], result.stderr
    good = tmp_path / "agents.yaml"
    good.write_text(
        "agents:\n  - name: triage\n    instructions: You are triage.\n    handoffs: [billing]\n"
        "  - name: billing\n    instructions: You are billing.\n"
    )
    with serving(tmp_path, "--protocol", "openai", "--agents", str(good), "--cache") as running:
        sdk = openai.OpenAI(base_url=running.url, api_key=running.token, max_retries=0)
        answer = sdk.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}])
        assert answer.choices[0].message.content
