"""The parser of the portable filter text (Spring AI's filter expression language).

Grammar (keywords in either case)::

    expr      := and_expr (("or" | "||") and_expr)*
    and_expr  := unary (("and" | "&&") unary)*
    unary     := "not" unary | "(" expr ")" | predicate
    predicate := key ("==" | "!=" | ">" | ">=" | "<" | "<=") value
               | key ("in" | "nin" | "not" "in") "[" [value ("," value)*] "]"
               | key "is" ["not"] "null"
    key       := name ("." name)* | quoted string        (a dotted key is one flat metadata key)
    value     := quoted string | number | "true" | "false"

Strings take single or double quotes; a backslash escapes the next character (``\\n`` and ``\\t``
stand for a newline and a tab). Text that does not parse raises ``FilterSyntaxError`` (a
ValueError) naming the 1-based position, and so does text nesting parentheses deeper than
``MAX_DEPTH`` (64) levels. A chain of ``and``/``or`` terms and a run of ``not``s may be as long as
you like (they are parsed without recursion).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

__all__ = ["MAX_DEPTH", "FilterSyntaxError", "NodeFactory", "parse_with"]

N = TypeVar("N")

MAX_DEPTH = 64
"""How deep a filter may nest: levels of parentheses in its text, alternations of and / or / not in
its tree (``nodes.check_depth``). Every walker of a filter recurses once per level."""


class NodeFactory(Protocol[N]):
    """How the parser builds nodes (the nodes module gives the one factory; the parser imports no
    node class, so nodes may call the parser)."""

    def comparison(self, key: str, op: str, value: Any) -> N: ...

    def membership(self, key: str, values: tuple[Any, ...], negated: bool) -> N: ...

    def null_check(self, key: str, negated: bool) -> N: ...

    def and_(self, left: N, right: N) -> N: ...

    def or_(self, left: N, right: N) -> N: ...

    def not_(self, operand: N) -> N: ...


class FilterSyntaxError(ValueError):
    """Filter text that does not parse; ``position`` is 1-based, ``text`` the whole expression."""

    def __init__(self, message: str, *, text: str, position: int) -> None:
        super().__init__(message)
        self.text = text
        self.position = position


TokenKind = Literal["(", ")", "[", "]", ",", "op", "and", "or", "string", "number", "name", "end"]


@dataclass(frozen=True, slots=True)
class _Token:
    kind: TokenKind
    text: str
    position: int  # 1-based
    value: object = None


_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?(?![\w.])")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_OPERATORS = ("==", "!=", ">=", "<=", "&&", "||", ">", "<")
_ESCAPES = {"n": "\n", "t": "\t"}


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def error(self, message: str, index: int) -> FilterSyntaxError:
        return _error(self.text, message, index + 1)

    def tokens(self) -> list[_Token]:
        out: list[_Token] = []
        text = self.text
        while True:
            while self.i < len(text) and text[self.i].isspace():
                self.i += 1
            if self.i >= len(text):
                out.append(_Token("end", "", self.i + 1))
                return out
            out.append(self._next())

    def _next(self) -> _Token:
        text, i = self.text, self.i
        c = text[i]
        if c in "()[],":
            self.i += 1
            return _Token(c, c, i + 1)  # type: ignore[arg-type]
        for op in _OPERATORS:
            if text.startswith(op, i):
                self.i += len(op)
                kind: TokenKind = "and" if op == "&&" else "or" if op == "||" else "op"
                return _Token(kind, op, i + 1)
        if c in "'\"":
            return self._string(c)
        number = _NUMBER.match(text, i)
        if number:
            self.i = number.end()
            return _Token("number", number.group(), i + 1, self._number(number, i))
        name = _NAME.match(text, i)
        if name:
            self.i = name.end()
            return _Token("name", name.group(), i + 1)
        raise self.error(f"unexpected character {c!r}", i)

    def _number(self, match: re.Match[str], start: int) -> int | float:
        raw = match.group()
        if match.group(1) is None and match.group(2) is None:
            value = int(raw)
            if not -(2**63) <= value <= 2**63 - 1:
                raise self.error(f"the integer {raw} is outside the 64-bit range", start)
            return value
        number = float(raw)
        if number in (float("inf"), float("-inf")):
            raise self.error(f"the number {raw} is too large", start)
        return number

    def _string(self, quote: str) -> _Token:
        text, start = self.text, self.i
        i = start + 1
        parts: list[str] = []
        while i < len(text):
            c = text[i]
            if c == "\\":
                if i + 1 >= len(text):
                    break
                parts.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                i += 2
                continue
            if c == quote:
                self.i = i + 1
                return _Token("string", text[start : i + 1], start + 1, "".join(parts))
            parts.append(c)
            i += 1
        raise self.error(f"the string opened here has no closing {quote}", start)


def _error(text: str, message: str, position: int) -> FilterSyntaxError:
    return FilterSyntaxError(
        f"filter {text!r} does not parse at position {position}: {message}", text=text, position=position
    )


def _describe(token: _Token) -> str:
    return "the end of the expression" if token.kind == "end" else repr(token.text)


class _Parser(Generic[N]):
    def __init__(self, text: str, make: NodeFactory[N]) -> None:
        self.text = text
        self.make = make
        self.tokens = _Lexer(text).tokens()
        self.k = 0
        self.depth = 0  # parentheses open around the current token

    @property
    def token(self) -> _Token:
        return self.tokens[self.k]

    def kind(self) -> TokenKind:
        return self.tokens[self.k].kind

    def take(self) -> _Token:
        token = self.tokens[self.k]
        self.k += 1
        return token

    def keyword(self, *words: str) -> bool:
        token = self.token
        return token.kind == "name" and token.text.lower() in words

    def fail(self, expected: str) -> FilterSyntaxError:
        token = self.token
        return _error(self.text, f"expected {expected}, found {_describe(token)}", token.position)

    def parse(self) -> N:
        if self.kind() == "end":
            raise self.fail("a filter expression")
        node = self.expr()
        if self.kind() != "end":
            raise self.fail("'and', 'or' or the end of the expression")
        return node

    def expr(self) -> N:
        return self.joined("or", self.make.or_, self.and_expr)

    def and_expr(self) -> N:
        return self.joined("and", self.make.and_, self.unary)

    def joined(self, word: Literal["and", "or"], join: Callable[[N, N], N], operand: Callable[[], N]) -> N:
        """``operand (word operand)*``, joined from the left (``word``: the keyword or its symbol,
        ``&&`` / ``||``)."""
        node = operand()
        while self.kind() == word or self.keyword(word):
            self.take()
            node = join(node, operand())
        return node

    def unary(self) -> N:
        nots = 0
        while self.keyword("not"):  # a run of nots without recursion
            self.take()
            nots += 1
        if self.kind() == "(":
            opened = self.take()
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _error(
                    self.text,
                    f"the parentheses nest deeper than {MAX_DEPTH} levels; flatten the filter",
                    opened.position,
                )
            node = self.expr()
            if self.kind() != ")":
                raise self.fail("')'")
            self.take()
            self.depth -= 1
        else:
            node = self.predicate()
        for _ in range(nots):
            node = self.make.not_(node)
        return node

    def key(self) -> str:
        token = self.token
        if token.kind == "string":
            self.take()
            key = str(token.value)
            if not key:
                raise _error(self.text, "a key cannot be empty", token.position)
            return key
        if token.kind == "name" and token.text.lower() not in _RESERVED:
            self.take()
            return token.text
        raise self.fail("a metadata key (a name, a dotted name or a quoted string)")

    def predicate(self) -> N:
        key = self.key()
        token = self.token
        if token.kind == "op":
            self.take()
            return self.make.comparison(key, token.text, self.value())
        if self.keyword("in", "nin"):
            self.take()
            return self.make.membership(key, self.values(), token.text.lower() == "nin")
        if self.keyword("not"):
            self.take()
            if not self.keyword("in"):
                raise self.fail("'in' after 'not'")
            self.take()
            return self.make.membership(key, self.values(), True)
        if self.keyword("is"):
            self.take()
            negated = self.keyword("not")
            if negated:
                self.take()
            if not self.keyword("null"):
                raise self.fail("'null'")
            self.take()
            return self.make.null_check(key, negated)
        raise self.fail("an operator (==, !=, >, >=, <, <=, in, nin, not in, is null, is not null)")

    def value(self) -> Any:
        token = self.token
        if token.kind in ("string", "number"):
            self.take()
            return token.value
        if self.keyword("true", "false"):
            self.take()
            return token.text.lower() == "true"
        raise self.fail("a value (a quoted string, a number, true or false)")

    def values(self) -> tuple[Any, ...]:
        if self.kind() != "[":
            raise self.fail("'[' opening a list of values")
        self.take()
        values: list[Any] = []
        if self.kind() == "]":
            self.take()
            return ()
        while True:
            values.append(self.value())
            if self.kind() == "]":
                self.take()
                return tuple(values)
            if self.kind() != ",":
                raise self.fail("',' or ']'")
            self.take()


_RESERVED = frozenset({"and", "or", "not", "in", "nin", "is", "null", "true", "false"})


def parse_with(text: str, make: NodeFactory[N]) -> N:
    """The filter ``text`` describes (see the module's grammar), built by ``make``."""
    if not isinstance(text, str):
        raise TypeError(f"a filter expression must be a str, got {text!r}")
    return _Parser(text, make).parse()
