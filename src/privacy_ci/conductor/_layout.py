"""The layout kit of generated documents: seeded draws, number and date formats, and
the blocks a document is made of (paragraphs, bullets, aligned tables, fields).

Nothing here knows an organisation: names, addresses and wording come from a
corpus's ``content/`` folder (see `privacy_ci.conductor._templates`).
"""

from __future__ import annotations

import hashlib
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TypeVar

T = TypeVar("T")

WIDTH = 78
RULE = "=" * WIDTH
THIN_RULE = "-" * WIDTH

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_POW10 = (1, 10, 100, 1000, 10000)


def _sha256(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()


@dataclass(frozen=True)
class Draw:
    """Keyed, order-independent pseudo-random draws from SHA-256.

    Each draw is named by a salt, so adding or reordering draws in a template
    never shifts the others; Python's ``hash()`` and ``random`` play no part.
    """

    key: str

    def _u64(self, salt: str) -> int:
        return int.from_bytes(_sha256(self.key, salt)[:8], "big")

    def num(self, salt: str, lo: int, hi: int) -> int:
        if hi <= lo:
            return lo
        return lo + self._u64(salt) % (hi - lo + 1)

    def pick(self, salt: str, options: Sequence[T]) -> T:
        return options[self._u64(salt) % len(options)]

    def day(self, salt: str, start: date, end: date) -> date:
        return start + timedelta(days=self.num(salt, 0, (end - start).days))

    def digits(self, salt: str, n: int) -> str:
        return str(self._u64(salt) % 10**n).zfill(n)

    def chance(self, salt: str, percent: int) -> bool:
        return self.num(salt, 1, 100) <= percent


# ------------------------------------------------------------------- formatting


def us_date(d: date) -> str:
    return f"{d.month:02d}/{d.day:02d}/{d.year}"


def long_date(d: date) -> str:
    return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"


def money(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}${cents // 100:,}.{cents % 100:02d}"


def dollars(amount: int) -> str:
    return money(amount * 100)


def fixed(value: int, dp: int) -> str:
    """An integer counted in 10**-dp units, printed with `dp` decimals (no float rounding)."""
    if dp == 0:
        return str(value)
    scale = _POW10[dp]
    return f"{value // scale}.{value % scale:0{dp}d}"


def scaled(x: float, dp: int) -> int:
    return round(x * _POW10[dp])


def first_upper(text: str) -> str:
    return text[:1].upper() + text[1:]


def salutation(name: str) -> str:
    """How a letter greets a person: "Dr. <surname>" for doctors, else the first name."""
    base = name.split(",")[0].strip()
    if base.startswith("Dr. "):
        return "Dr. " + base.split()[-1]
    return base.split()[0]


def npi(base9: str) -> str:
    """A 10-digit NPI whose check digit follows the Luhn rule with the 80840 prefix."""
    total = 0
    for i, ch in enumerate(reversed("80840" + base9)):
        digit = int(ch)
        if i % 2 == 0:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return base9 + str((10 - total % 10) % 10)


# ----------------------------------------------------------------------- blocks


def para(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), WIDTH)


def bullets(items: Sequence[str], numbered: bool = False) -> str:
    out = []
    for i, item in enumerate(items, 1):
        mark = f"{i}. " if numbered else "- "
        out.append(
            textwrap.fill(
                " ".join(item.split()),
                WIDTH,
                initial_indent=mark,
                subsequent_indent=" " * len(mark),
            )
        )
    return "\n".join(out)


def table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]))]
    return "\n".join(
        "".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def field_line(line: str) -> str:
    """One ``Key: value`` line, wrapped with a hanging indent."""
    return textwrap.fill(line, WIDTH, subsequent_indent="  ")


def fields(lines: Sequence[str]) -> str:
    return "\n".join(field_line(line) for line in lines)
