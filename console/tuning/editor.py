"""What the tier-config form editor fills an emptied box with.

The editor says "an empty box means the field's default". For the optional fields that is the
schema's own default (scheduler/config.py; the editor reads it from the JSON schema and leaves
the field out of the document). The four fields every queue must set (batch size, waiting
time, tokens per batch, priority: docs/architecture.md#tier-config) have no schema default, so
an emptied box would otherwise be "field required"; for them the default is the seed's value
for a tier of that name (online / batch / offline), else the value a new tier starts with, and
the editor writes it into the document so the version holds what the operator saw.
"""

from __future__ import annotations

from typing import Any

from scheduler import config_to_dict, default_config
from scheduler.config import QueueConfig

# What "Add tier" starts a new tier with, and an emptied required box of a tier the seed does
# not name gets (its priority: one past the least urgent tier's, computed by the editor).
NEW_TIER = {"max_batch_size": 8, "max_waiting_time_ms": 10, "max_tokens_per_batch": 4096}


def required_queue_fields() -> list[str]:
    return [name for name, info in QueueConfig.model_fields.items() if info.is_required()]


def editor_defaults() -> dict[str, Any]:
    """{"required": [...], "queues": {tier: {field: seed value}}, "new_tier": {...}}"""
    required = required_queue_fields()
    seed = config_to_dict(default_config())["scheduler"]["queues"]
    return {
        "required": required,
        "queues": {
            tier: {name: value for name, value in queue.items() if name in required}
            for tier, queue in seed.items()
        },
        "new_tier": dict(NEW_TIER),
    }
