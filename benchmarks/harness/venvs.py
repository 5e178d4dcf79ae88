"""Peer libraries live in their own virtual environments under ``benchmarks/.venvs/`` (git-ignored),
installed here with pip from PyPI — never project dependencies."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent
VENVS_DIR = BENCH_DIR / ".venvs"
REPO_DIR = BENCH_DIR.parent
MAIN_PYTHON = REPO_DIR / ".venv" / "bin" / "python"

PEER_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "advisorchain": ("-e", f"{REPO_DIR}[openai]"),
    "pydantic-ai": ("pydantic-ai-slim[openai]>=1.0",),
    "langchain": ("langchain>=1.0", "langchain-openai>=1.0"),
    "openai-agents": ("openai-agents>=0.3",),
    "aiohttp": ("aiohttp>=3.9", "orjson>=3.9"),
}
"""What each benchmark venv gets; the versions that resolved are reported with the results.
``advisorchain`` is the default install for a real model (``pip install 'advisorchain[openai]'``,
from this checkout, editable: the code measured is the code here), never the project venv, which
has every extra."""

_PROJECT_FILE = REPO_DIR / "pyproject.toml"


@dataclass(frozen=True, slots=True)
class Environment:
    """A python to run workers with, or why there is none."""

    python: Path | None
    error: str | None = None


def _marker(venv: Path) -> Path:
    return venv / "bench-requirements.txt"


def ensure_peer(name: str, install: bool, log: Path) -> Environment:
    """The peer's venv python, creating the venv and installing its requirements when needed."""
    requirements = PEER_REQUIREMENTS[name]
    venv = VENVS_DIR / name
    python = venv / "bin" / "python"
    wanted = "\n".join(requirements)
    if "-e" in requirements:  # this checkout: installed again when its dependencies change
        wanted += "\n" + hashlib.sha256(_PROJECT_FILE.read_bytes()).hexdigest()
    if python.exists() and _marker(venv).exists() and _marker(venv).read_text() == wanted:
        return Environment(python)
    if not install:
        return Environment(None, f"no venv at {venv} (run without --no-install to create it)")
    print(f"installing {name} into {venv} ...", file=sys.stderr, flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", *requirements],
        ]
        for step in steps:
            done = subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, check=False)
            if done.returncode != 0:
                return Environment(
                    None, f"`{' '.join(step[-len(requirements) - 2 :])}` failed: {_last_error(log)}"
                )
    _marker(venv).write_text(wanted)
    return Environment(python)


def _last_error(log: Path) -> str:
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if "ERROR" in ln]
    return (lines[-1] if lines else "see " + str(log))[:300]


def main_environment() -> Environment:
    """The project venv (the floor and advisorchain run there)."""
    if not MAIN_PYTHON.exists():
        return Environment(None, f"no project venv at {MAIN_PYTHON}")
    return Environment(MAIN_PYTHON)
