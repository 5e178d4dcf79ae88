"""The harness and the implementations import as top-level ``harness`` / ``impls`` (as the worker
runs them), so the benchmarks folder goes on the path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
