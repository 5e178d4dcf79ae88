"""The README's first command runs on a base install: the CLI needs no extra (no OpenTelemetry SDK,
no provider SDK) for ``advisorchain demo``."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"openai", "anthropic"} or name.startswith("opentelemetry.sdk"):
            raise ImportError(f"{name} is not installed (blocked by the test)")
        return None

sys.meta_path.insert(0, Block())
from advisorchain.cli import main
sys.argv = ["advisorchain", "demo"]
main()
"""


def test_the_demo_runs_without_any_extra_installed() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "assistant:" in done.stdout
