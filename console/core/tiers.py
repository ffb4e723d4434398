"""How every page shows tiers: their order and their colours (one definition for the fleet's
telemetry charts and the benchmark pages).

The order comes from the tier config: the seed's tiers most urgent first (smallest priority
number, scheduler.TierConfig.tiers_by_urgency), then any other tier by name, and a run's
"overall" row last.
"""

from __future__ import annotations

from loadgen.stats import NO_TIER, OVERALL
from scheduler import default_config

SEED_TIERS = default_config().tiers_by_urgency()  # ["online", "batch", "offline"]
_URGENCY = {name: rank for rank, name in enumerate(SEED_TIERS)}
_OTHER, _LAST = len(_URGENCY), len(_URGENCY) + 1

# Plotly trace colours; a tier without one gets Plotly's next default colour.
TIER_COLOURS = {
    "online": "#2357c6",
    "batch": "#b26b00",
    "offline": "#68717d",
    OVERALL: "#111111",
    NO_TIER: "#1a7f37",
}


def tier_sort_key(tier: str) -> tuple[int, str]:
    """Display order: the seed's tiers by urgency, any other tier by name, overall last."""
    return (_LAST if tier == OVERALL else _URGENCY.get(tier, _OTHER), tier)
