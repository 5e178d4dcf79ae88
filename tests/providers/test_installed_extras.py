"""Each provider extra works as declared: a fresh virtual environment with only
``pip install -e '.[<extra>]'``, the extra's packages pinned AT THEIR LOWER BOUNDS, runs a tool loop
(blocking and streamed, through every adapter of the extra) against a loopback OpenAI-/Anthropic-
compatible server, and importing the other extra's adapter says which extra to install.

The environments are cached under ``.extras-venvs/`` (git-ignored), keyed by the pins, the core
dependencies and the Python version, so only the first run installs (about a minute per extra).
Without PyPI, or when PyPI (or this machine) is too slow for the installs to end within
``INSTALL_LIMIT``, the test skips, saying so. Whatever happens, every pip process it started is
killed by its process id (with the processes pip started, in the group it leads) before the module
ends, so none outlives it to load the machine under later tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.openai_server import running_server
from tests.support.scripts import LOOP_FINAL, tool_loop

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".extras-venvs"
CHECK_MODULE = "tests.providers.extras_check"  # run from the repository root
EXTRAS = {"openai": "anthropic", "anthropic": "openai"}  # extra -> the one it must not bring
_LOWER_BOUND = re.compile(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*>=\s*([^,;\s]+)")
_OFFLINE = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeoutError",
)
_SLOW_REGISTRY = ("ReadTimeoutError", "Read timed out", "timed out")
INSTALL_LIMIT = 600.0
"""Seconds both installs may take together (they run side by side); about a minute on an idle
machine with PyPI at hand."""


class TooSlow(str):
    """Why an install was given up: it did not end within ``INSTALL_LIMIT``."""


def _pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def lower_bounds(extra: str) -> dict[str, str]:
    """``{package: lower bound}`` for every requirement of ``extra`` in pyproject.toml."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    bounds: dict[str, str] = {}
    for requirement in project["optional-dependencies"][extra]:
        match = _LOWER_BOUND.match(requirement)
        assert match is not None, f"[{extra}] requirement {requirement!r} has no lower bound (>=)"
        bounds[match.group(1).lower()] = match.group(3)
    return bounds


def _venv_path(extra: str) -> Path:
    """Where the environment for ``extra`` at its lower bounds lives (the key changes with the pins,
    the core dependencies and the Python version)."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    key_source = json.dumps(
        [lower_bounds(extra), project["dependencies"], list(sys.version_info[:2])], sort_keys=True
    )
    return CACHE / f"{extra}-{hashlib.sha256(key_source.encode()).hexdigest()[:12]}"


def _start_install(extra: str) -> subprocess.Popen[str] | None:
    """Start installing ``extra`` at its lower bounds into a fresh environment (None when cached)."""
    venv = _venv_path(extra)
    if (venv / "ready").exists() and (venv / "bin" / "python").exists():
        return None
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    constraints = venv / "lower-bounds.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in lower_bounds(extra).items()))
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
    return subprocess.Popen(
        [*install, "-c", str(constraints), "-e", f"{REPO}[{extra}]"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # pip leads a process group of its own: killed whole, by its id
    )


def _kill(process: subprocess.Popen[str]) -> None:
    """End ``process`` and every process it started (its group, whose id is its process id)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):  # it ended in between
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _finish(extra: str, process: subprocess.Popen[str], deadline: float) -> Path | str:
    """The environment once ``process`` installed it, or why not (its output, or TooSlow)."""
    venv = _venv_path(extra)
    try:
        output, _ = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill(process)
        shutil.rmtree(venv, ignore_errors=True)
        return TooSlow(f"pip install -e '.[{extra}]' did not end within {INSTALL_LIMIT:g} s")
    if process.returncode != 0:
        return output
    (venv / "ready").write_text(json.dumps(lower_bounds(extra)))
    return venv


@pytest.fixture(scope="module")
def installed() -> Iterator[dict[str, Path | str]]:
    """Every provider extra's environment, installed side by side (the installs wait on the network
    far more than on the CPU); for an extra that could not be installed, the reason instead."""
    started: dict[str, subprocess.Popen[str] | None] = {}
    try:
        for extra in sorted(EXTRAS):
            started[extra] = _start_install(extra)
        deadline = time.monotonic() + INSTALL_LIMIT
        yield {
            extra: _venv_path(extra) if process is None else _finish(extra, process, deadline)
            for extra, process in started.items()
        }
    finally:
        for process in started.values():
            if process is not None:
                _kill(process)


def _venv(installed: dict[str, Path | str], extra: str) -> Path:
    """The ready environment for ``extra``; skips when PyPI was unreachable or too slow (or this
    machine too busy for the install to end in time), fails on any other error."""
    venv = installed[extra]
    if isinstance(venv, Path):
        return venv
    pins = lower_bounds(extra)
    if isinstance(venv, TooSlow):
        pytest.skip(
            f"{venv} (PyPI or this machine too slow), so [{extra}] at its lower bounds {pins} is untested"
        )
    if any(sign in venv for sign in _OFFLINE):
        pytest.skip(f"PyPI is unreachable, so [{extra}] cannot be installed at its lower bounds {pins}")
    if any(sign in venv for sign in _SLOW_REGISTRY):
        pytest.skip(f"PyPI answered too slowly, so [{extra}] cannot be installed at its lower bounds {pins}")
    pytest.fail(f"pip install -e '.[{extra}]' at the lower bounds {pins} failed:\n{venv[-3000:]}")


def _clean_env() -> dict[str, str]:
    """This environment without provider keys or URLs (the check must not depend on them)."""
    drop = {
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
    }
    return {k: v for k, v in os.environ.items() if k not in drop and k != "PYTHONPATH"}


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_every_requirement_of_a_provider_extra_has_a_lower_bound(extra: str) -> None:
    assert lower_bounds(extra)


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_an_extra_installed_alone_at_its_lower_bounds_runs_a_tool_loop(
    installed: dict[str, Path | str], extra: str
) -> None:
    venv = _venv(installed, extra)
    with running_server(tool_loop) as server:
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-m", CHECK_MODULE, extra, server.url],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,  # a bound for a hang: the check takes seconds
            env=_clean_env(),
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    adapters = ("chat", "responses") if extra == "openai" else ("messages",)
    assert report["answers"] == {f"{a}/{mode}": LOOP_FINAL for a in adapters for mode in ("call", "stream")}
    assert report["versions"] == {
        **{p: None for p in ("openai", "anthropic", "httpx2", "genai-prices", "aiohttp", "orjson")},
        **lower_bounds(extra),
    }
    # gpt-4o: 600 in at $2.50, 400 cached at $1.25, 100 out at $10; Sonnet 4.5: $3, $0.30, $15
    assert report["prices"] == {"openai": "0.003", "anthropic": "0.00342"}
    # The extra brings the fast path: every adapter's requests travel over aiohttp, and every
    # private attribute that path reads is where it reads it, at the lower bounds too.
    assert report["paths"] == dict.fromkeys(adapters, "AiohttpPath")
    assert report["internals_missing"] == []
    assert report["missing_other"] is not None
    assert f"pip install 'advisorchain[{EXTRAS[extra]}]'" in report["missing_other"]
    # Every round of every loop reached the server: two per loop (tool call, then final answer).
    assert len(server.requests) == 4 * len(adapters)
