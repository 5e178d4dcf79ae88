"""What every usage test starts from: no tool call recorded yet."""

from __future__ import annotations

import pytest

from tests.usage.usage_support import ran


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()
