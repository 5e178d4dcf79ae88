"""``python -m advisorchain.cli``: the ``advisorchain`` command."""

from __future__ import annotations

from .app import main

raise SystemExit(main())
