"""``advisorchain web`` as a user runs it: a process that prints the URL with its token, listens on
loopback unless asked, serves the offline demo agent without ``--model``, and stops on Ctrl-C."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.web.web_helpers import COMMAND, events, named, web, web_env

_env = web_env


def test_it_prints_a_loopback_url_with_a_token_and_refuses_requests_without_it(tmp_path: Path) -> None:
    with web(tmp_path) as running:
        assert running.base.startswith("http://127.0.0.1:") and len(running.token) >= 24
        assert httpx.get(running.base + "/").status_code == 403
        assert httpx.get(running.base + "/api/info").status_code == 403
        refused = httpx.post(running.base + "/api/conversations/c/turns", json={"text": "hi"})
        assert refused.status_code == 403
        page = httpx.get(running.url)
        assert page.status_code == 200 and "advisorchain" in page.text


def test_without_a_model_the_offline_demo_agent_answers_and_the_page_says_so(tmp_path: Path) -> None:
    with web(tmp_path) as running:
        http = httpx.Client(
            base_url=running.base, headers={"x-advisorchain-token": running.token}, timeout=30
        )
        info = http.get("/api/info").json()
        assert info["scripted"] is True and "scripted model" in info["notice"]
        assert {t["name"] for t in info["tools"]} == {
            "get_weather",
            "find_places",
            "book_table",
            "flight_status",
        }
        conversation = http.post("/api/conversations").json()["id"]
        found = events(
            http.post(f"/api/conversations/{conversation}/turns", json={"text": "Plan a day in Lisbon"}).text
        )
        assert "sunny, 24°C" in "".join(d["text"] for d in named(found, "text"))
        assert {d["name"] for d in named(found, "tool")} == {"get_weather", "find_places"}
        booking = events(
            http.post(f"/api/conversations/{conversation}/turns", json={"text": "Book a table"}).text
        )
        (call,) = named(booking, "approval")[0]["calls"]
        assert call["name"] == "book_table"
        done = events(
            http.post(
                f"/api/conversations/{conversation}/turns",
                json={"approvals": {call["id"]: {"approved": True}}},
            ).text
        )
        assert "confirmed" in "".join(d["text"] for d in named(done, "text"))
        assert "Plan a day in Lisbon" in info["examples"]
        paris = events(
            http.post(f"/api/conversations/{conversation}/turns", json={"text": "Weather in Paris?"}).text
        )
        assert [d["arguments"] for d in named(paris, "tool") if d["state"] == "done"] == ['{"city": "Paris"}']
        assert "I don't know the weather in Paris" in "".join(d["text"] for d in named(paris, "text"))
        hello = events(http.post(f"/api/conversations/{conversation}/turns", json={"text": "hello"}).text)
        assert "scripted demo model" in "".join(d["text"] for d in named(hello, "text"))
        http.close()
    assert (tmp_path / "data" / "sessions.sqlite3").exists()  # the conversations live in the sessions store


def test_a_session_is_opened_first_and_kept_in_the_sessions_store(tmp_path: Path) -> None:
    with web(tmp_path, "--session", "trip") as running:
        assert running.url.endswith("#c=trip")
        http = httpx.Client(
            base_url=running.base, headers={"x-advisorchain-token": running.token}, timeout=30
        )
        assert http.get("/api/conversations/trip").status_code == 200
        http.post("/api/conversations/trip/turns", json={"text": "hello"})
        http.close()
    listed = subprocess.run(
        [*COMMAND, "sessions", "show", "trip"], capture_output=True, text=True, env=_env(tmp_path)
    )
    assert listed.returncode == 0 and "user: hello" in listed.stdout


def test_a_host_beyond_loopback_is_served_only_with_a_warning(tmp_path: Path) -> None:
    with web(tmp_path, "--host", "0.0.0.0") as running:
        port = running.base.rsplit(":", 1)[1]
        assert httpx.get(f"http://127.0.0.1:{port}/api/info").status_code == 403
        running.process.send_signal(signal.SIGINT)
        _, err = running.process.communicate(timeout=15)
    assert "warning: listening on 0.0.0.0, not on loopback" in " ".join(err.split())


def test_debug_logs_every_request_but_never_the_token(tmp_path: Path) -> None:
    with web(tmp_path, "--debug") as running:
        for path in ("/", "/static/app.js", "/static/style.css", "/api/info"):
            assert httpx.get(f"{running.base}{path}?token={running.token}").status_code == 200
        assert httpx.get(f"{running.base}/api/info", headers={"x-advisorchain-token": running.token}).is_success
        running.process.send_signal(signal.SIGINT)
        out, err = running.process.communicate(timeout=15)
    logged = out + err
    assert "GET /static/app.js?token=[hidden]" in logged  # uvicorn's access log, with the token hidden
    assert running.token not in logged


def test_ctrl_c_stops_it_cleanly(tmp_path: Path) -> None:
    with web(tmp_path) as running:
        running.process.send_signal(signal.SIGINT)
        _, err = running.process.communicate(timeout=15)
        assert running.process.returncode == 0
        assert "stopped" in err and "Traceback" not in err


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        done = subprocess.run(
            [*COMMAND, "web", "--port", str(port)],
            capture_output=True,
            text=True,
            env=_env(tmp_path),
            timeout=60,
        )
    finally:
        taken.close()
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "pick another --port" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--base-url", "http://127.0.0.1:9/v1"], "--base-url needs --model"),
        (["--model", "nope"], "is not provider:name"),
        (["--session", " "], "a session needs a name"),
        (["--host", "no such host.invalid"], "is not a host to listen on"),
    ],
)
def test_bad_flags_are_usage_errors(tmp_path: Path, args: list[str], says: str) -> None:
    done = subprocess.run(
        [*COMMAND, "web", *args], capture_output=True, text=True, env=_env(tmp_path), timeout=60
    )
    assert done.returncode == 2 and says in done.stderr


def test_a_real_model_without_its_key_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*COMMAND, "web", "--model", "openai:gpt-4o-mini"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
    )
    assert done.returncode == 1 and "OPENAI_API_KEY is not set" in done.stderr


BLOCKED = """
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"starlette", "uvicorn"}:
            raise ImportError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, Block())
from advisorchain.cli import main
sys.exit(main(["web"]))
"""


def test_without_the_web_extra_it_says_how_to_install_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED], capture_output=True, text=True, env=_env(tmp_path), timeout=60
    )
    assert done.returncode == 1
    assert "pip install 'advisorchain[web]'" in done.stderr and "Traceback" not in done.stderr
