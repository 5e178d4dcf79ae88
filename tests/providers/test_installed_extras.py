"""Each provider extra works as declared: a fresh virtual environment with only
``pip install -e '.[<extra>]'``, the extra's packages pinned AT THEIR LOWER BOUNDS, runs a tool loop
(blocking and streamed, through every adapter of the extra) against a loopback OpenAI-/Anthropic-
compatible server, and importing the other extra's adapter says which extra to install.

The environments are cached under ``.extras-venvs/`` (git-ignored), keyed by the pins, the core
dependencies and the Python version, so only the first run installs (about a minute per extra).
Without PyPI the install cannot happen and the test skips, saying so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from loopback_server import FINAL, loopback_server

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".extras-venvs"
CHECK_SCRIPT = Path(__file__).resolve().parent / "extras_check.py"
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
    )


@pytest.fixture(scope="module")
def installed() -> dict[str, Path | str]:
    """Every provider extra's environment, installed side by side (the installs wait on the network
    far more than on the CPU); for an extra that could not be installed, the reason instead."""
    started = {extra: _start_install(extra) for extra in sorted(EXTRAS)}
    result: dict[str, Path | str] = {}
    for extra, process in started.items():
        venv = _venv_path(extra)
        if process is None:
            result[extra] = venv
            continue
        output, _ = process.communicate(timeout=540)
        if process.returncode == 0:
            (venv / "ready").write_text(json.dumps(lower_bounds(extra)))
            result[extra] = venv
        else:
            result[extra] = output
    return result


def _venv(installed: dict[str, Path | str], extra: str) -> Path:
    """The ready environment for ``extra``; skips when PyPI was unreachable, fails on any other error."""
    venv = installed[extra]
    if isinstance(venv, Path):
        return venv
    pins = lower_bounds(extra)
    if any(sign in venv for sign in _OFFLINE):
        pytest.skip(f"PyPI is unreachable, so [{extra}] cannot be installed at its lower bounds {pins}")
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
    with loopback_server() as server:
        done = subprocess.run(
            [str(venv / "bin" / "python"), str(CHECK_SCRIPT), extra, server.url],
            capture_output=True,
            text=True,
            timeout=120,
            env=_clean_env(),
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    adapters = ("chat", "responses") if extra == "openai" else ("messages",)
    assert report["answers"] == {f"{a}/{mode}": FINAL for a in adapters for mode in ("call", "stream")}
    assert report["versions"] == {
        **{p: None for p in ("openai", "anthropic", "httpx2")},
        **lower_bounds(extra),
    }
    assert report["missing_other"] is not None
    assert f"pip install 'advisorchain[{EXTRAS[extra]}]'" in report["missing_other"]
    # Every round of every loop reached the server: two per loop (tool call, then final answer).
    assert len(server.requests) == 4 * len(adapters)
