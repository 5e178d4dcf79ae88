"""What an adapter says when the SDK of its extra is not installed."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(module: str, extra: str, exc: ImportError) -> ModuleNotFoundError:
    """A ModuleNotFoundError for ``module`` that names the missing package and the extra that brings it."""
    return ModuleNotFoundError(
        f"{module} needs the {exc.name or 'SDK'!r} package, which is not installed: "
        f"pip install 'advisorchain[{extra}]' (from a clone: pip install -e '.[{extra}]')",
        name=exc.name,
    )
