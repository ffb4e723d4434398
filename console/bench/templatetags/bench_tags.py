"""Number formatting for the bench pages."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def ms(seconds: Any) -> str:
    """Seconds as milliseconds with sensible precision; an em dash when unknown."""
    if seconds is None or seconds == "":
        return "—"
    value = float(seconds) * 1000
    return (
        f"{value:.0f}"
        if abs(value) >= 100
        else f"{value:.1f}"
        if abs(value) >= 10
        else f"{value:.2f}"
    )


@register.filter
def num(value: Any, digits: int = 1) -> str:
    if value is None or value == "":
        return "—"
    return f"{float(value):.{int(digits)}f}"


@register.filter
def pct(ratio: Any) -> str:
    if ratio is None or ratio == "":
        return "—"
    return f"{float(ratio) * 100:.1f}%"


@register.filter
def signed_ms(seconds: Any) -> str:
    if seconds is None:
        return "—"
    value = float(seconds) * 1000
    return f"{value:+.1f}"


@register.filter(name="json")
def as_json(value: Any) -> str:
    """A stored document as indented JSON, the form operators paste and diff (not Python's
    dict text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@register.filter
def outcome_class(outcome: Any) -> str:
    """The badge class of a decision's outcome (app.css: better green, worse red, mixed
    amber; "no clear change" and "not enough data" plain)."""
    return {"better": "better", "worse": "worse", "mixed": "warn"}.get(str(outcome), "")


@register.filter
def change_pct(estimate: Any) -> str:
    """A decision figure's change: "+12%" (ratios) or "+1.5 pts" (rates); an em dash when
    unknown."""
    change = estimate.get("change") if isinstance(estimate, dict) else None
    if change is None:
        return "—"
    if estimate.get("kind") == "rate":
        return f"{change * 100:+.1f} pts"
    return f"{change * 100:+,.1f}%"


@register.filter
def figure_value(value: Any, unit: str) -> str:
    """A decision figure's value in its unit (seconds shown as ms, shares as %)."""
    if value is None:
        return "—"
    if unit == "ms":
        return f"{float(value) * 1000:,.1f} ms"
    if unit == "%":
        return f"{float(value) * 100:.2f}%"
    return f"{float(value):,.2f} {unit}"


@register.filter
def signed_pct(ratio: Any) -> str:
    """A change as a signed percentage ("+12.5%"); an em dash when unknown."""
    if ratio is None or ratio == "":
        return "—"
    return f"{float(ratio) * 100:+,.1f}%"
