"""The private attributes of the SDKs, httpx2 and aiohttp that the HTTP stack reads are listed in
one place (``advisorchain.models._http.internals``) and are where it reads them at the installed
versions (the lower bounds run the same check in ``extras_check.py``). That an SDK which moved one
keeps its requests on the SDK's own stack is tested over HTTP in tests/reliability/test_http_paths.py."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from advisorchain.models._http import internals, transport

aiohttp = pytest.importorskip(
    "aiohttp", reason="the aiohttp path needs aiohttp (the provider extras bring it)"
)

PACKAGE = Path(__file__).resolve().parents[2] / "advisorchain"
READERS = (
    "models/_http/transport.py",
    "models/_http/loops.py",
    "models/_common.py",
    "models/anthropic.py",
    "models/openai.py",
    "models/openai_responses.py",
    "models/_base.py",
)
"""The modules that talk to the SDK clients."""

OWN = {"_replace"}
"""Underscore names the readers use that are public APIs (``SplitResult._replace``)."""


def _clients() -> dict[str, Any]:
    return {
        "openai": openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"),
        "anthropic": anthropic.AsyncAnthropic(api_key="k", base_url="http://127.0.0.1:9"),
    }


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_every_private_attribute_the_fast_path_needs_is_in_the_installed_sdk(sdk: str) -> None:
    assert internals.missing(_clients()[sdk], sdk) == []


async def test_the_private_attributes_of_aiohttp_are_in_the_installed_aiohttp() -> None:
    session = aiohttp.ClientSession()
    try:
        assert internals.missing_in_aiohttp(session) == []
    finally:
        await session.close()


def _private_reads(path: Path) -> set[str]:
    """Underscore attributes read or set on anything but ``self``/``cls``, and the underscore
    names given to getattr/hasattr/setattr, in one module."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value.startswith("_")
        ):
            names.add(node.args[1].value)
    return names


def test_every_private_attribute_read_is_listed_in_one_place() -> None:
    listed = {i.name.rpartition(".")[2] for i in (*internals.REQUIRED, *internals.OPTIONAL)}
    listed |= {attribute for _, attribute, _ in internals.AIOHTTP}
    read = {name for module in READERS for name in _private_reads(PACKAGE / module)}
    assert read - listed - OWN == set()
    assert set(transport._SEND_HOOKS) <= listed  # read through a loop over their names


def test_the_list_names_what_reads_each_attribute() -> None:
    for item in (*internals.REQUIRED, *internals.OPTIONAL):
        assert item.read_by.strip(), item
