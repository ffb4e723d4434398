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


class NamedChoiceField(serializers.ChoiceField):
    """A choice whose refusal lists the valid values: `"bogus" is not a valid choice; one of:
    smoke, mixed-tiers, ...` (DRF's own message names none, leaving the client to guess)."""

    def to_internal_value(self, data: Any) -> Any:
        if data == "" and self.allow_blank:
            return ""
        try:
            return self.choice_strings_to_values[str(data)]
        except KeyError:
            valid = ", ".join(str(key) for key in self.choice_strings_to_values)
            raise serializers.ValidationError(
                f'"{data}" is not a valid choice; one of: {valid}', code="invalid_choice"
            ) from None
