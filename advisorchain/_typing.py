"""Types as pydantic can take them.

Before Python 3.12 pydantic refuses ``typing.TypedDict`` (it needs ``typing_extensions.TypedDict``),
yet users on 3.11 write the former. ``pydantic_compatible`` rebuilds such TypedDicts — wherever
they sit inside a type: ``list[Movie]``, ``Movie | None``, ``Annotated[Movie, ...]`` — with the same
fields, required keys and docs.
"""

from __future__ import annotations

import sys
import types
import typing
from typing import Any

import typing_extensions

__all__ = ["pydantic_compatible"]

_WRAPPERS = (typing.Required, typing.NotRequired, typing_extensions.Required, typing_extensions.NotRequired)


def pydantic_compatible(tp: Any) -> Any:
    """``tp`` with every ``typing.TypedDict`` in it rebuilt as a ``typing_extensions.TypedDict``."""
    if sys.version_info >= (3, 12):
        return tp
    return _convert(tp, {})


def _convert(tp: Any, memo: dict[Any, Any]) -> Any:
    if typing_extensions.is_typeddict(tp) and type(tp).__module__ == "typing":
        return _rebuild(tp, memo)
    args = typing.get_args(tp)
    if not args or typing.get_origin(tp) is typing.Literal:
        return tp
    new_args = tuple(_convert(a, memo) for a in args)
    if all(a is b for a, b in zip(new_args, args, strict=True)):
        return tp
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return typing.Annotated[(new_args[0], *tp.__metadata__)]
    if origin is typing.Union or origin is types.UnionType:
        return typing.Union[new_args]  # noqa: UP007 - built from a tuple of arguments
    if isinstance(tp, types.GenericAlias):
        return types.GenericAlias(origin, new_args)
    return tp.copy_with(new_args)


def _rebuild(tp: Any, memo: dict[Any, Any]) -> Any:
    if tp in memo:
        return memo[tp]
    fields: dict[str, Any] = {}
    for key, hint in typing.get_type_hints(tp, include_extras=True).items():
        # With postponed annotations, 3.11's TypedDict cannot see NotRequired[...] in its strings, so
        # __required_keys__ is wrong there; the resolved hint's own wrapper decides first.
        required = key in tp.__required_keys__
        while typing.get_origin(hint) in _WRAPPERS:
            required = typing.get_origin(hint) in (typing.Required, typing_extensions.Required)
            hint = typing.get_args(hint)[0]
        hint = _convert(hint, memo)
        fields[key] = typing_extensions.Required[hint] if required else typing_extensions.NotRequired[hint]
    rebuilt: Any = typing_extensions.TypedDict(tp.__name__, fields)  # type: ignore[misc]
    rebuilt.__doc__ = tp.__doc__
    rebuilt.__module__ = tp.__module__
    rebuilt.__qualname__ = tp.__qualname__
    memo[tp] = rebuilt
    return rebuilt
