"""``pii_guard``: finds personal data — e-mail addresses, phone numbers, card numbers (valid Luhn
checksum), IBANs (valid mod-97 checksum), IPv4 and IPv6 addresses — and redacts it or trips.

Each kind is found by a pattern and, for cards and IBANs, checked by its checksum: a digit run that
fails its checksum is left alone. The scanner is incremental: an output guard in sentence mode is
asked about the whole text so far at every sentence, and that text begins with what it answered
last time, so only what follows the last safe cut is scanned again.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from ..guards import GuardContext, GuardResult, in_worker_thread

__all__ = ["PII_KINDS", "find_pii", "luhn_valid", "mod97_valid", "pii_guard", "redact_pii"]

PiiKind = Literal["email", "phone", "credit_card", "iban", "ip_address"]
PII_KINDS: Final[tuple[PiiKind, ...]] = ("email", "phone", "credit_card", "iban", "ip_address")
_TOKENS: Final[dict[str, str]] = {
    "email": "[EMAIL]",
    "phone": "[PHONE]",
    "credit_card": "[CREDIT_CARD]",
    "iban": "[IBAN]",
    "ip_address": "[IP_ADDRESS]",
}
# Overlapping finds: the first kind in this order wins.
_PRIORITY: Final[dict[str, int]] = {
    "email": 0,
    "iban": 1,
    "": 2,
    "credit_card": 3,
    "ip_address": 4,
    "phone": 5,
}
# "": an IBAN-like run that fails its checksum, left alone (no other kind is looked for inside it).

_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}(?![\w-])")
# A run of ASCII digits with single separators (space, dot, dash, parentheses), maybe after a "+".
_DIGIT_RUN = re.compile(r"(?<![\w+.\-])(?:\+|\()?[0-9](?:(?:[ .\-]|\) ?|\()?[0-9])*(?![\w])")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
_IPV4 = re.compile(
    r"(?<![0-9.])(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}"
    r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?![0-9]|\.[0-9])"
)
_IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:(?<=:)[0-9.]{7,15})?(?![\w:])")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{1,2}[./-][0-9]{1,2}[./-][0-9]{2,4}")


def luhn_valid(digits: str) -> bool:
    """True when the ASCII digit string passes the Luhn checksum (card numbers)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return bool(digits) and total % 10 == 0


def mod97_valid(iban: str) -> bool:
    """True when the IBAN (no spaces, upper case) passes its mod-97 checksum."""
    if not 15 <= len(iban) <= 34 or not iban.isascii() or not iban.isalnum():
        return False
    moved = iban[4:] + iban[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


@dataclass(frozen=True, slots=True)
class _Find:
    start: int
    end: int
    kind: str


def _digits(text: str) -> str:
    return "".join(ch for ch in text if "0" <= ch <= "9")


def _digit_runs(text: str, wanted: set[str], a: int, b: int) -> Iterable[_Find]:
    """Cards (13-19 digits, spaces or dashes, valid Luhn) and phones (E.164: "+" and 8-15 digits;
    national: 8-12 digits) among the digit runs; a card-like run that fails Luhn is left alone."""
    for m in _DIGIT_RUN.finditer(text, a, b):
        run = m.group()
        digits = _digits(run)
        n = len(digits)
        if n < 8:
            continue
        card_like = 13 <= n <= 19 and not any(ch in run for ch in ".()+")
        if card_like:
            if "credit_card" in wanted and luhn_valid(digits):
                yield _Find(m.start(), m.end(), "credit_card")
            continue
        if "phone" not in wanted:
            continue
        end = _phone_end(run)
        if end is not None:
            yield _Find(m.start(), m.start() + end, "phone")


_DIGITS = re.compile(r"[0-9]+")


def _phone_end(run: str) -> int | None:
    """Where the phone number a digit run starts with ends (None: it starts with none): the
    longest prefix of whole words of digit groups with one kind of separator (parentheses aside) holding
    8-15 digits after a "+", or 8-12 digits, that is not a date."""
    ends = [m.end() for m in _DIGITS.finditer(run)]
    for end in reversed(ends):
        if end < len(run) and run[end] != " ":
            continue  # never cut a number in two ("2.50")
        piece = run[:end]
        n = sum(1 for ch in piece if "0" <= ch <= "9")
        if n < 8:
            return None
        separators = {
            ch for i, ch in enumerate(piece) if ch in " .-" and not (ch == " " and piece[i - 1] == ")")
        }
        if len(separators) > 1 or _DATE.fullmatch(piece.strip("()")):
            continue
        if (piece.startswith("+") and n <= 15) or n <= 12:
            return end
    return None


def _ibans(text: str, a: int, b: int) -> Iterable[_Find]:
    for m in _IBAN.finditer(text, a, b):
        run = m.group()
        end = len(run)
        # The pattern may take in a following word in capitals ("... 00 THEN"): try without it.
        while True:
            if mod97_valid(run[:end].replace(" ", "")):
                yield _Find(m.start(), m.start() + end, "iban")
                break
            cut = run.rfind(" ", 0, end)
            if cut < 15 or not run[cut + 1 : end].isalpha():
                yield _Find(m.start(), m.end(), "")  # fails its checksum: left alone, digits and all
                break
            end = cut


def _ipv6(text: str, a: int, b: int) -> Iterable[_Find]:
    for m in _IPV6.finditer(text, a, b):
        candidate = m.group()
        if candidate.count(":") < 2:
            continue
        try:
            ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        yield _Find(m.start(), m.end(), "ip_address")


def _emails(text: str) -> Iterable[_Find]:
    """E-mail addresses, found from their "@" (a fast search; most text has none)."""
    at = text.find("@")
    end = 0
    while at >= 0:
        if at >= end:
            start = at
            while start > 0 and at - start < 64 and (text[start - 1].isalnum() or text[start - 1] in "_.%+-"):
                start -= 1
            m = _EMAIL.match(text, start)
            if m is not None and m.end() > at:
                end = m.end()
                yield _Find(m.start(), m.end(), "email")
        at = text.find("@", at + 1)


_SEED = re.compile(r"[0-9:]")
"""What every find but an e-mail address holds: an ASCII digit or a colon (IPv6)."""


_SHORT = 2048
"""Texts up to this length are looked at whole; longer ones only around their digits and colons."""


def _regions(text: str) -> list[tuple[int, int]]:
    """The parts of ``text`` worth a closer look: around each digit or colon, from the safe cut
    before it to the safe cut after it (no find spans a safe cut), merged."""
    regions: list[tuple[int, int]] = []
    for seed in _SEED.finditer(text):
        at = seed.start()
        if regions and at < regions[-1][1]:
            continue
        before = 0
        for back in (256, 4096, len(text)):
            cuts = [m.end() for m in _CUT.finditer(text, max(0, at - back), at)]
            if cuts or back >= at:
                before = cuts[-1] if cuts else 0
                break
        after = _CUT.search(text, at)
        region = (before, after.end() if after is not None else len(text))
        if regions and region[0] <= regions[-1][1]:
            regions[-1] = (regions[-1][0], region[1])
        else:
            regions.append(region)
    return regions


def find_pii(text: str, kinds: Iterable[str] = PII_KINDS) -> list[tuple[int, int, str]]:
    """The personal data in ``text``: ``(start, end, kind)`` spans in text order, without overlaps."""
    wanted = set(kinds)
    finds: list[_Find] = []
    if "email" in wanted:
        finds.extend(_emails(text))
    if not wanted - {"email"}:
        regions: list[tuple[int, int]] = []
    elif len(text) <= _SHORT:  # a sentence or so: one look at the whole (finding regions costs more)
        regions = [(0, len(text))] if _SEED.search(text) else []
    else:
        regions = _regions(text)
    for a, b in regions:
        if wanted & {"iban", "credit_card", "phone"}:
            finds.extend(f for f in _ibans(text, a, b) if f.kind != "iban" or "iban" in wanted)
        if wanted & {"credit_card", "phone"}:
            finds.extend(_digit_runs(text, wanted, a, b))
        if "ip_address" in wanted:
            finds.extend(_Find(m.start(), m.end(), "ip_address") for m in _IPV4.finditer(text, a, b))
            finds.extend(_ipv6(text, a, b))
    finds.sort(key=lambda f: (f.start, _PRIORITY[f.kind], -f.end))
    kept: list[tuple[int, int, str]] = []
    for f in finds:
        if kept and f.start < kept[-1][1]:
            continue  # overlaps one kept already (an earlier start, or the same start and a stronger kind)
        kept.append((f.start, f.end, f.kind))
    return [k for k in kept if k[2]]


def redact_pii(text: str, kinds: Iterable[str] = PII_KINDS) -> tuple[str, tuple[str, ...]]:
    """``text`` with each find replaced by its token (``[EMAIL]``...), and the kinds found."""
    finds = find_pii(text, kinds)
    if not finds:
        return text, ()
    parts: list[str] = []
    at = 0
    for start, end, kind in finds:
        parts.append(text[at:start])
        parts.append(_TOKENS[kind])
        at = end
    parts.append(text[at:])
    return "".join(parts), tuple(dict.fromkeys(kind for _, _, kind in finds))


_CUT = re.compile(r"[^\w)\s]\s+")
_END_CUT = re.compile(r"[^\w)\s]")
"""A place where scanning may start afresh: whitespace after punctuation (no find spans it)."""
_OFFLOAD_CHARS: Final = 256 * 1024
"""Scans longer than this run in a worker thread, so a huge text never blocks the event loop."""


class _PiiGuard:
    """The guard ``pii_guard`` returns (an async callable named ``pii_guard``)."""

    name = "pii_guard"
    __name__ = "pii_guard"

    def __init__(self, kinds: tuple[str, ...], action: Literal["redact", "block"]) -> None:
        self.kinds = kinds
        self.action = action
        # (the text answered last time up to its last safe cut, that prefix's scan result)
        self._last: tuple[str, str, tuple[str, ...]] = ("", "", ())

    def _known(self, text: str) -> tuple[int, str, tuple[str, ...]]:
        """How much of ``text`` was scanned before: its length, its redacted form, the kinds found
        in it. What was scanned last time up to a safe cut is not scanned again when ``text``
        begins with it, or with its redacted form (an output guard in sentence mode is asked about
        the released, redacted text followed by the new sentences)."""
        last_in, last_out, last_found = self._last
        if last_in and text.startswith(last_in) and _space_follows(text, len(last_in), last_in):
            return len(last_in), last_out, last_found
        if (
            last_out
            and last_out != last_in
            and text.startswith(last_out)
            and _space_follows(text, len(last_out), last_out)
        ):
            return len(last_out), last_out, ()  # redacted already: nothing in it
        return 0, "", ()

    def _scan(
        self, text: str, known: tuple[int, str, tuple[str, ...]] | None = None
    ) -> tuple[str, tuple[str, ...]]:
        """``text`` redacted (``text`` itself when nothing was found) and the kinds found; only
        what follows the part scanned before (``_known``) is scanned."""
        head_in, head_out, found = self._known(text) if known is None else known
        tail = text[head_in:]
        cut = _last_cut(tail)
        first, found_first = redact_pii(tail[:cut], self.kinds) if cut else ("", ())
        rest, found_rest = redact_pii(tail[cut:], self.kinds) if cut < len(tail) else ("", ())
        if cut:
            self._last = (text[: head_in + cut], head_out + first, found + found_first)
        found_all = tuple(dict.fromkeys(found + found_first + found_rest))
        if not found_all:
            return text, ()  # nothing found: the text as given (no copy, no comparison)
        return head_out + first + rest, found_all

    async def __call__(self, text: str, context: GuardContext) -> GuardResult:
        known = self._known(text)
        if len(text) - known[0] > _OFFLOAD_CHARS:  # a long scan never blocks the event loop
            out, found = await in_worker_thread(self._scan, text, known)
        else:
            out, found = self._scan(text, known)
        if not found:
            return GuardResult(True)
        if self.action == "block":
            return GuardResult(False, f"the text holds personal data ({', '.join(found)})")
        return GuardResult(True, replacement=out)

    def __repr__(self) -> str:
        return f"pii_guard(kinds={self.kinds!r}, action={self.action!r})"


def _space_follows(text: str, at: int, prefix: str) -> bool:
    """Whether a scan may start afresh at ``at``: the prefix ends with whitespace, or the text ends
    there or goes on with whitespace (a prefix cut right after its closing punctuation)."""
    return prefix[-1:].isspace() or at == len(text) or text[at].isspace()


def _last_cut(text: str) -> int:
    """The last safe place in ``text`` to split a scan (no find spans it; a cut right after the
    text's closing punctuation is safe only if whitespace follows, which ``_space_follows`` checks
    when the cut is used); 0 when there is none."""
    if len(text) > 1 and _END_CUT.match(text, len(text) - 1) and not text[-2].isspace():
        return len(text)
    cut = 0
    for m in _CUT.finditer(text, max(0, len(text) - 4096)):
        cut = m.end()
    return cut


def pii_guard(kinds: Sequence[str] = PII_KINDS, action: Literal["redact", "block"] = "redact") -> _PiiGuard:
    """A guard that finds personal data: e-mail addresses, phone numbers (E.164, and national
    formats of at least 8 digits), card numbers (13-19 digits, spaces or dashes allowed, valid Luhn
    checksum only), IBANs (valid mod-97 checksum only) and IPv4/IPv6 addresses.

    ``action="redact"`` passes with each find replaced by ``[EMAIL]``, ``[PHONE]``,
    ``[CREDIT_CARD]``, ``[IBAN]`` or ``[IP_ADDRESS]``; ``"block"`` trips, naming the kinds found
    (never quoting them). A digit run that fails its checksum is left alone.

    >>> OutputGuardrailAdvisor(pii_guard(), release="sentence")
    >>> InputGuardrailAdvisor(pii_guard(kinds=("credit_card", "iban"), action="block"))
    """
    if isinstance(kinds, str) or not isinstance(kinds, Sequence):
        raise TypeError(f"kinds must be a sequence of kinds from {PII_KINDS!r}, got {kinds!r}")
    unknown = [k for k in kinds if k not in PII_KINDS]
    if unknown or not kinds:
        raise ValueError(f"pii_guard kinds must be some of {PII_KINDS!r}; got {list(kinds)!r}")
    if action not in ("redact", "block"):
        raise ValueError(f"pii_guard action must be 'redact' or 'block', got {action!r}")
    return _PiiGuard(tuple(dict.fromkeys(kinds)), action)
