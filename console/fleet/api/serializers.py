"""REST shapes of the fleet app. Writes go through the workflows (services.py, gateway_keys.py:
audit + transactions); secrets are write-only or shown once, never read back."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.core.fields import IdRelatedField
from console.fleet import gateway_keys, services
from console.fleet.choices import EndpointKind
from console.fleet.models import Endpoint, GatewayKey, Node


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class LabelsField(serializers.Field):
    """A list of strings, or the same as comma-separated text ("h200, zone-a")."""

    default_error_messages = {"invalid": "Give a list of strings or comma-separated text."}

    def to_internal_value(self, data: Any) -> list[str]:
        if isinstance(data, str):
            items = data.split(",")
        elif isinstance(data, list) and all(isinstance(x, str) for x in data):
            items = data
        else:
            self.fail("invalid")
        return [item.strip() for item in items if item.strip()][:50]

    def to_representation(self, value: Any) -> list[str]:
        return list(value or [])


class _AuditContext:
    """Serializers that write through services need the acting user and request."""

    context: dict[str, Any]

    def _who(self) -> tuple[Any, Any]:
        request = self.context.get("request")
        return getattr(request, "user", None), request


class EndpointSerializer(_AuditContext, serializers.ModelSerializer):
    serializer_related_field = IdRelatedField
    url = serializers.HyperlinkedIdentityField(view_name="endpoint-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    api_key = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=4000,
        style={"input_type": "password"},
        help_text="Write-only. Omit or leave empty on update to keep the stored key.",
    )
    api_key_masked = serializers.CharField(read_only=True)
    models = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, max_length=500
    )
    kind = serializers.ChoiceField(choices=EndpointKind.choices, default=EndpointKind.EXTERNAL)

    class Meta:
        model = Endpoint
        fields = [
            "id",
            "url",
            "display",
            "name",
            "base_url",
            "api_key",
            "api_key_masked",
            "models",
            "default_model",
            "kind",
            "node",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind = attrs.get("kind", getattr(self.instance, "kind", EndpointKind.EXTERNAL))
        node = attrs.get("node", getattr(self.instance, "node", None))
        if node is not None and kind != EndpointKind.GATEWAY:
            raise serializers.ValidationError(
                {"node": "Only endpoints of kind 'gateway' belong to a node."}
            )
        return attrs

    def create(self, validated_data: dict[str, Any]) -> Endpoint:
        user, request = self._who()
        return services.create_endpoint(user, request, **validated_data)

    def update(self, instance: Endpoint, validated_data: dict[str, Any]) -> Endpoint:
        user, request = self._who()
        return services.update_endpoint(instance, user, request, **validated_data)


class EnvImportSerializer(serializers.Serializer):
    text = serializers.CharField(
        max_length=100_000,
        trim_whitespace=False,
        help_text="Lines like `export X_BASE_URL=...`, `X_API_KEY=...`, `X_MODEL_ONLINE=...`",
    )
    kind = serializers.ChoiceField(choices=EndpointKind.choices, default=EndpointKind.EXTERNAL)


class EnvExportSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="Export lines; the key is masked")


class DoctorStepSerializer(serializers.Serializer):
    name = serializers.CharField()
    ok = serializers.BooleanField()
    detail = serializers.CharField()
    fix = serializers.CharField(allow_blank=True)


class DoctorResultSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    steps = DoctorStepSerializer(many=True)


class NodeSerializer(_AuditContext, serializers.ModelSerializer):
    serializer_related_field = IdRelatedField
    url = serializers.HyperlinkedIdentityField(view_name="node-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    labels = LabelsField(required=False)
    status = serializers.SerializerMethodField()
    is_simulated = serializers.BooleanField(read_only=True)
    # Set by create: the new node's token in plaintext, for the one reply that shows it.
    one_time_token: str

    class Meta:
        model = Node
        fields = [
            "id",
            "url",
            "display",
            "name",
            "labels",
            "status",
            "is_simulated",
            "mode",
            "agent_version",
            "listen_url",
            "engine",
            "health",
            "last_sample",
            "last_seen_at",
            "keys_version",
            "desired_tier_config",
            "applied_tier_config",
            "desired_launch_profile",
            "applied_launch_profile",
            "apply_errors",
            "acknowledged_errors",
            "created_at",
        ]
        read_only_fields = [
            "mode",
            "agent_version",
            "listen_url",
            "engine",
            "health",
            "last_sample",
            "last_seen_at",
            "keys_version",
            "applied_tier_config",
            "applied_launch_profile",
            "apply_errors",
            "acknowledged_errors",
            "created_at",
        ]

    def get_status(self, obj: Node) -> str:
        return obj.status()

    def create(self, validated_data: dict[str, Any]) -> Node:
        user, request = self._who()
        with transaction.atomic():  # a node is created with its desired versions, or not at all
            node, token = services.create_node(
                validated_data["name"], validated_data.get("labels", []), user, request
            )
            tier, profile = (
                validated_data.get("desired_tier_config"),
                validated_data.get("desired_launch_profile"),
            )
            if tier is not None or profile is not None:
                services.set_desired(
                    [node],
                    tier_config=tier,
                    launch_profile=profile,
                    user=user,
                    reason="set at creation",
                    request=request,
                )
        self.one_time_token = token
        return node

    def update(self, instance: Node, validated_data: dict[str, Any]) -> Node:
        user, request = self._who()
        try:
            return services.update_node(instance, user, request, **validated_data)
        except services.FleetError as exc:  # e.g. a sweep or a rollout owns its versions now
            raise serializers.ValidationError({exc.field: exc.message}) from None


class NodeKindSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["tier_config", "launch_profile", "gateway_keys", "reload"],
        help_text="unset-desired: tier_config or launch_profile; acknowledge-error: any kind "
        "the node reports an apply error of",
    )


class AgentCommandsSerializer(serializers.Serializer):
    attached = serializers.CharField()
    managed = serializers.CharField()


class NodeTokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Shown once; only its SHA-256 is stored")
    commands = AgentCommandsSerializer()


class NodeCreatedSerializer(NodeSerializer):
    token = serializers.CharField(
        read_only=True, help_text="Shown once; only its SHA-256 is stored"
    )
    commands = AgentCommandsSerializer(read_only=True)

    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "token", "commands"]


class GatewayKeySerializer(_AuditContext, serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="gatewaykey-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    tiers = serializers.ListField(
        child=serializers.CharField(max_length=50), allow_empty=False, max_length=20
    )
    nodes = IdRelatedField(
        queryset=Node.objects.all(),
        many=True,
        required=False,
        help_text="Nodes the key is valid on; empty: every node",
    )
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    is_active = serializers.BooleanField(read_only=True)
    masked = serializers.CharField(
        read_only=True,
        help_text="The key as every page shows it (an endpoint's api_key_masked alike): "
        "vendor prefix ... last four",
    )
    # Set by create: the new key in plaintext, for the one reply that shows it.
    one_time_key: str

    class Meta:
        model = GatewayKey
        fields = [
            "id",
            "url",
            "display",
            "name",
            "prefix",
            "masked",
            "tiers",
            "default_tier",
            "all_nodes",
            "nodes",
            "created_by",
            "created_at",
            "revoked_at",
            "is_active",
        ]
        read_only_fields = ["prefix", "all_nodes", "created_at", "revoked_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            gateway_keys.check_tiers(attrs["tiers"], attrs["default_tier"])
        except services.FleetError as exc:
            raise serializers.ValidationError({exc.field: exc.message}) from None
        return attrs

    def create(self, validated_data: dict[str, Any]) -> GatewayKey:
        user, request = self._who()
        try:
            key, plaintext = gateway_keys.create_gateway_key(
                validated_data["name"],
                validated_data["tiers"],
                validated_data["default_tier"],
                user,
                nodes=validated_data.get("nodes") or None,
                request=request,
            )
        except services.FleetError as exc:
            raise serializers.ValidationError({exc.field: exc.message}) from None
        self.one_time_key = plaintext
        return key


class GatewayKeyCreatedSerializer(GatewayKeySerializer):
    key = serializers.CharField(read_only=True, help_text="Shown once; only its SHA-256 is stored")

    class Meta(GatewayKeySerializer.Meta):
        fields = [*GatewayKeySerializer.Meta.fields, "key"]
