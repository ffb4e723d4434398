"""Parsing object ids from query strings and forms: the one rule every page and API uses.

An id is ASCII digits only, in the range of the primary keys (BigAutoField: 1 to 2**63 - 1).
`str.isdigit()` is not that rule: it takes "²" (which `int()` then refuses) and Arabic-Indic
digits (which `int()` silently reads as ASCII ones), and nothing bounds the value, so a huge
number reaches the database driver and overflows there. Every caller gets a ValueError whose
text can be shown next to the parameter's name.
"""

from __future__ import annotations

import re

MAX_ID = 2**63 - 1
_ASCII_DIGITS = re.compile(r"[0-9]+")


class IdError(ValueError):
    """`field` names the parameter; the message says what is wrong with it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def parse_id(raw: object, field: str = "id") -> int:
    """The id `raw` spells, or IdError naming `field`."""
    text = raw if isinstance(raw, str) else str(raw) if isinstance(raw, int) else None
    if text is None or not _ASCII_DIGITS.fullmatch(text):
        raise IdError(field, "must be an id: ASCII digits only")
    digits = text.lstrip("0")
    # Compared by length first: a megabyte of digits must not cost a big-int parse.
    value = int(digits or "0") if len(digits) <= len(str(MAX_ID)) else MAX_ID + 1
    if not 1 <= value <= MAX_ID:
        raise IdError(field, f"must be an id between 1 and {MAX_ID}")
    return value


def optional_id(raw: str | None, field: str = "id") -> int | None:
    """None for a missing or empty parameter, else parse_id."""
    if raw is None or raw == "":
        return None
    return parse_id(raw, field)


def id_or_none(raw: str | None) -> int | None:
    """For pages that quietly ignore a malformed filter or preselection: the id, or None."""
    try:
        return optional_id(raw)
    except IdError:
        return None
