"""A loopback OpenAI-compatible judge for ``advisorchain eval --judge``: it rates an answer 4 when
the answer (between ``<answer>`` tags) says "sunny", else 1, as the JSON verdict LLMJudgeEvaluator
asks for."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ANSWER = re.compile(r"<answer>\n(.*?)\n</answer>", re.DOTALL)


def verdict_for(prompt: str) -> dict[str, object]:
    found = _ANSWER.search(prompt)
    sunny = found is not None and "sunny" in found.group(1)
    return (
        {"score": 4, "feedback": "Says the weather."}
        if sunny
        else {"score": 1, "feedback": "No weather in it."}
    )


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        prompt = str(request["messages"][-1]["content"])
        body = json.dumps(
            {
                "id": "judge-1",
                "object": "chat.completion",
                "created": 0,
                "model": request.get("model", "judge"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": json.dumps(verdict_for(prompt))},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def judge_server() -> Iterator[str]:
    """The judge's base URL while inside."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
