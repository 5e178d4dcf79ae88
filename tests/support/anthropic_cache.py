"""A loopback Anthropic Messages server that emulates the provider's prefix caching (API.md §21).

The request is read in Anthropic's prefix order — tool definitions, ``system``, then each content
block of each message — as a list of blocks, each with a token count from its characters (4 a
token, at least 1). ``cache_control`` on a block is a breakpoint (it is left out of what is
compared, as the provider leaves it out). A request:

* reads the longest prefix, ending at a block boundary at or before its last breakpoint, that an
  earlier request wrote (``cache_read_input_tokens``);
* writes its prefix up to each breakpoint; what it writes past what it read is
  ``cache_creation_input_tokens``;
* pays the rest as ``input_tokens``.

``tool_choice`` is part of the prefix of the messages (the provider drops cached messages when it
changes). Time to live is not emulated: a test forgets the cache with ``expire()``.

The answers come from ``reply(body) -> dict`` — a ``{"text": ...}`` or ``{"tool": name, "input":
{...}}`` — and are sent as a JSON body or, for ``stream: true``, as the provider's events.
``CacheEmulator`` is a ``ScriptedServer`` script; ``usages`` holds each answer's usage in order.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.openai_server import Received, Step, json_reply, sse_reply

__all__ = ["CacheEmulator", "prefix_blocks"]

Reply = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def _canonical(value: Any) -> str:
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "cache_control"}
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def prefix_blocks(body: Mapping[str, Any]) -> list[tuple[str, int, bool]]:
    """The request as (canonical text, tokens, is a breakpoint) blocks, in prefix order."""
    blocks: list[tuple[str, int, bool]] = []
    for tool in body.get("tools") or ():
        text = _canonical(tool)
        blocks.append(("tool:" + text, _tokens(text), "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(("system:" + system, _tokens(system), False))
    elif isinstance(system, list):
        for block in system:
            text = _canonical(block)
            blocks.append(("system:" + text, _tokens(str(block.get("text", ""))), "cache_control" in block))
    blocks.append(("tool_choice:" + _canonical(body.get("tool_choice")), 0, False))
    for message in body.get("messages") or ():
        role = message.get("role")
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content or ():
            text = _canonical(block)
            blocks.append((f"{role}:{text}", _tokens(text), "cache_control" in block))
    return blocks


@dataclass
class CacheEmulator:
    """The server's script: answers by ``reply``, counts cache reads and writes as the module says."""

    reply: Reply
    model: str = "claude-emulated"
    written: set[str] = field(default_factory=set)
    usages: list[dict[str, int]] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def expire(self) -> None:
        """Forget everything written (the time to live passed)."""
        with self._lock:
            self.written.clear()

    def usage_of(self, body: Mapping[str, Any]) -> dict[str, int]:
        """The usage the provider would report for ``body`` (and what it writes, remembered)."""
        blocks = prefix_blocks(body)
        hashes: list[str] = []
        running = hashlib.sha256()
        for text, _, _ in blocks:
            running.update(text.encode())
            running.update(b"\0")
            hashes.append(running.hexdigest())
        totals = [0]
        for _, tokens, _ in blocks:
            totals.append(totals[-1] + tokens)
        breakpoints = [i for i, (_, _, bp) in enumerate(blocks) if bp]
        read = written = 0
        with self._lock:
            if breakpoints:
                last = breakpoints[-1]
                hit = max((i for i in range(last + 1) if hashes[i] in self.written), default=None)
                read = totals[hit + 1] if hit is not None else 0
                written = totals[last + 1] - read
                for i in breakpoints:
                    self.written.add(hashes[i])
        return {
            "input_tokens": totals[-1] - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": 5,
        }

    def __call__(self, request: Received) -> Sequence[Step]:
        body = request.body
        self.bodies.append(body)
        usage = self.usage_of(body)
        self.usages.append(usage)
        answer = self.reply(body)
        if "tool" in answer:
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": f"toolu_{len(self.usages)}",
                "name": answer["tool"],
                "input": dict(answer.get("input") or {}),
            }
            stop = "tool_use"
        else:
            block = {"type": "text", "text": str(answer["text"])}
            stop = "end_turn"
        if not body.get("stream"):
            return json_reply(
                200,
                {
                    "id": f"msg_{len(self.usages)}",
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [block],
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
        return sse_reply(
            _events(block, stop, usage, self.model, len(self.usages)), done=False, event_names=True
        )


def _events(
    block: dict[str, Any], stop: str, usage: dict[str, int], model: str, number: int
) -> list[dict[str, Any]]:
    start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": f"msg_{number}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "usage": {**start_usage, "output_tokens": 1},
            },
        }
    ]
    if block["type"] == "text":
        events += [
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": block["text"]},
            },
        ]
    else:
        events += [
            {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
            },
        ]
    events += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
        {"type": "message_stop"},
    ]
    return events
