from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.core.fields import IdRelatedField
from console.tuning import services
from console.tuning.api.config_schema import TierConfigDocumentField
from console.tuning.diffs import ADDED, CHANGED, REMOVED
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from console.tuning.vllm_args import ArgsError
from scheduler import ConfigError, config_to_dict, parse_config

_BASE_FIELDS = [
    "id",
    "url",
    "display",
    "name",
    "version",
    "message",
    "author",
    "created_at",
    "parent",
]
_PARENT_HELP = (
    "Optional: the id of the version this one was made from (of the same kind); its diff is "
    "shown against it. Default: none, and the diff is against the previous number."
)
_READ_ONLY = ["id", "url", "display", "version", "author", "created_at"]


class _VersionSerializer(serializers.ModelSerializer):
    """Shared by both kinds: a version is created once and never updated."""

    # Relations in request bodies follow the one id rule (console/core/fields.py): `parent`.
    serializer_related_field = IdRelatedField
    display = serializers.CharField(source="label", read_only=True)
    author: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )

    def _context_user_request(self) -> dict[str, Any]:
        request = self.context.get("request")
        return {"user": getattr(request, "user", None), "request": request}

    def _create_kwargs(self, validated_data: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": validated_data["name"],
            "message": validated_data.get("message", ""),
            "parent": validated_data.get("parent"),
            **self._context_user_request(),
        }


class TierConfigVersionSerializer(_VersionSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="tierconfigversion-detail")
    config = TierConfigDocumentField(
        help_text="The tier config document (docs/architecture.md#tier-config; each field's "
        "description is in the schema, and in docs/admission.md's reference table)."
    )

    class Meta:
        model = TierConfigVersion
        fields = [*_BASE_FIELDS, "config"]
        read_only_fields = _READ_ONLY
        extra_kwargs = {
            "parent": {"required": False, "allow_null": True, "help_text": _PARENT_HELP}
        }

    def validate_config(self, value: Any) -> dict[str, Any]:
        try:
            return config_to_dict(parse_config(value))
        except ConfigError as exc:
            # One "path: rule" line per broken rule, so a client can point at each field.
            raise serializers.ValidationError([str(err) for err in exc.errors]) from None

    def create(self, validated_data: dict[str, Any]) -> TierConfigVersion:
        return services.create_tier_config(
            config=validated_data["config"], **self._create_kwargs(validated_data)
        )


class LaunchProfileVersionSerializer(_VersionSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="launchprofileversion-detail")
    args = serializers.JSONField(
        help_text="snake_case vLLM arguments; unset ones take vLLM's default."
    )
    command = serializers.SerializerMethodField(help_text="The rendered `vllm serve` line.")
    argv = serializers.SerializerMethodField(help_text="The same command as an argv list.")

    class Meta:
        model = LaunchProfileVersion
        fields = [*_BASE_FIELDS, "args", "command", "argv"]
        read_only_fields = _READ_ONLY
        extra_kwargs = {
            "parent": {"required": False, "allow_null": True, "help_text": _PARENT_HELP}
        }

    def validate_args(self, value: Any) -> dict[str, Any]:
        # The one check every write path takes (services.check_launch_args): the built-in
        # rules, then the engines' own parsers, so the API refuses what the form refuses.
        try:
            return services.check_launch_args(value)
        except ArgsError as exc:
            raise serializers.ValidationError([str(err) for err in exc.errors]) from None

    def get_command(self, obj: LaunchProfileVersion) -> str:
        return obj.command

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_argv(self, obj: LaunchProfileVersion) -> list[str]:
        return obj.argv()

    def create(self, validated_data: dict[str, Any]) -> LaunchProfileVersion:
        return services.create_launch_profile(
            args=validated_data["args"], **self._create_kwargs(validated_data)
        )


class VersionDiffRowSerializer(serializers.Serializer):
    path = serializers.CharField()
    old = serializers.JSONField(allow_null=True)
    new = serializers.JSONField(allow_null=True)
    # A plain string, not an enum: an enum named after the field ("kind") would collide in the
    # schema with other apps' `kind` choices.
    kind = serializers.CharField(help_text=f"{ADDED}, {REMOVED} or {CHANGED}")


class VersionRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()


class VersionDiffSerializer(serializers.Serializer):
    """`against` is the older side (null when `version` is the first of its name)."""

    against = VersionRefSerializer(allow_null=True)
    version = VersionRefSerializer()
    changes = VersionDiffRowSerializer(many=True)
