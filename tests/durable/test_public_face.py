"""What both engines show their callers the same way: the keywords of a run (``RunRequest``), public
in ``advisorchain.durable``, which imports neither engine."""

from __future__ import annotations

import subprocess
import sys
from typing import Unpack, get_type_hints

import pytest

from advisorchain.durable import RunRequest
from advisorchain.durable.dbos import DBOSAgent
from advisorchain.durable.temporal import TemporalAgent


def test_the_package_exports_run_request_and_imports_neither_engine() -> None:
    code = (
        "import sys, advisorchain.durable as durable; "
        "print(durable.__all__, sorted({m.split('.')[0] for m in sys.modules} & {'temporalio', 'dbos'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['RunRequest'] []"


@pytest.mark.parametrize("engine", [TemporalAgent, DBOSAgent])
@pytest.mark.parametrize("method", ["start", "run", "stream"])
def test_every_run_method_of_both_engines_takes_the_public_run_request(engine: type, method: str) -> None:
    assert get_type_hints(getattr(engine, method))["request"] == Unpack[RunRequest]


def test_run_request_names_the_keywords_a_run_takes() -> None:
    assert list(get_type_hints(RunRequest)) == ["messages", "system", "conversation_id", "tool_context"]
    assert RunRequest.__required_keys__ == frozenset()
