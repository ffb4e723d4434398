"""REST fields that follow the one id rule (console/core/ids.py) in request bodies.

DRF's PrimaryKeyRelatedField hands a string id to the database lookup as it is, and Django
reads "٣" (Arabic-Indic three) as 3: `{"tier_config": "٣"}` would pick version 3. Here a
string id must be ASCII digits in range; JSON integers keep working."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from console.core.ids import IdError, parse_id


class IdRelatedField(serializers.PrimaryKeyRelatedField):
    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str):
            try:
                data = parse_id(data, self.field_name or "id")
            except IdError as exc:
                self.fail("incorrect_type", data_type=f"str ({exc.message})")
        return super().to_internal_value(data)
