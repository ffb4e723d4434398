from __future__ import annotations

from rest_framework import serializers

from console.audit.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "created_at",
            "actor_name",
            "action",
            "object_type",
            "object_id",
            "object_repr",
            "before",
            "after",
            "source_ip",
            "message",
        ]
        read_only_fields = fields
