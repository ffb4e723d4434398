from __future__ import annotations

from typing import Any

from rest_framework import serializers

from console.accounts.models import ApiToken
from console.accounts.services import TokenError, check_name


class StrictCharField(serializers.CharField):
    """A string, not a number turned into one."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class ApiTokenSerializer(serializers.ModelSerializer):
    name = StrictCharField(max_length=100, help_text="What the token is for, e.g. 'ci-nightly'")
    user = serializers.CharField(source="user.username", read_only=True)
    active = serializers.BooleanField(read_only=True)
    display = serializers.CharField(source="__str__", read_only=True)

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "display",
            "name",
            "prefix",
            "user",
            "active",
            "created_at",
            "last_used_at",
            "revoked_at",
        ]
        read_only_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]

    def validate_name(self, value: Any) -> str:
        try:
            return check_name(value)
        except TokenError as exc:
            raise serializers.ValidationError(exc.message) from None


class CreatedApiTokenSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The token itself: shown this once")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
