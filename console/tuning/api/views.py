from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from console.core.ids import parse_id
from console.core.roles import OPERATOR
from console.fleet.models import Node
from console.tuning import services
from console.tuning.api.serializers import (
    LaunchProfileVersionSerializer,
    TierConfigVersionSerializer,
    VersionDiffSerializer,
)
from console.tuning.configmaps import render_configmap
from console.tuning.kube import render_yaml
from console.tuning.models import LaunchProfileVersion, TierConfigVersion, VersionedDocument
from scheduler import ConfigError

_NAME_FILTER = OpenApiParameter("name", str, description="Only versions of this name.")
_AGAINST = OpenApiParameter(
    "against",
    int,
    description="Id of the version to compare with (the older side); default: "
    "the version it was made from (`parent`), else the previous version of the same name.",
)


class YAMLRenderer(BaseRenderer):
    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        # Error bodies ({"detail": ErrorDetail(...)}) hold str subclasses that YAML's safe dumper
        # refuses; a JSON round trip turns them into plain values.
        text = (
            data
            if isinstance(data, str)
            else yaml.safe_dump(json.loads(json.dumps(data)), sort_keys=False)
        )
        return text.encode("utf-8")


def _ref(obj: VersionedDocument | None) -> dict[str, Any] | None:
    return None if obj is None else {"id": obj.pk, "name": obj.name, "version": obj.version}


class _VersionViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """List, create and read versions. No update or delete: versions are immutable (405)."""

    model: type[VersionedDocument]
    required_role = OPERATOR

    def get_queryset(self) -> QuerySet[Any]:
        qs = self.model.objects.select_related("author").order_by("-created_at", "-id")
        name = self.request.query_params.get("name")
        return qs.filter(name=name) if name else qs

    @extend_schema(parameters=[_AGAINST], responses=VersionDiffSerializer)
    @action(detail=True, methods=["get"])
    def diff(self, request: Request, pk: str | None = None) -> Response:
        """The structured diff from `against` (the older side) to this version."""
        obj = self.get_object()
        raw = request.query_params.get("against")
        if raw in (None, ""):
            against = obj.base()
        else:
            against = get_object_or_404(self.model, pk=parse_id(raw, "against"))
        rows = obj.diff_from(against)
        data = {
            "against": _ref(against),
            "version": _ref(obj),
            "changes": [r.as_dict() for r in rows],
        }
        return Response(VersionDiffSerializer(data).data)

    @extend_schema(
        responses={(200, "application/yaml"): OpenApiTypes.STR},
        description="The version as a Kubernetes ConfigMap (one per name: the version, "
        "author and message are labels and annotations), as the Git mirror commits it.",
    )
    @action(detail=True, methods=["get"], renderer_classes=[YAMLRenderer])
    def configmap(self, request: Request, pk: str | None = None) -> Response:
        return Response(render_configmap(self.get_object()))


@extend_schema_view(list=extend_schema(parameters=[_NAME_FILTER]))
class TierConfigVersionViewSet(_VersionViewSet):
    model = TierConfigVersion
    serializer_class = TierConfigVersionSerializer


class AdoptFlagsSerializer(serializers.Serializer):
    node = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all())
    name = serializers.SlugField(max_length=100, help_text="The launch profile to add a version to")


@extend_schema_view(list=extend_schema(parameters=[_NAME_FILTER]))
class LaunchProfileVersionViewSet(_VersionViewSet):
    model = LaunchProfileVersion
    serializer_class = LaunchProfileVersionSerializer

    @extend_schema(
        request=AdoptFlagsSerializer,
        responses={201: LaunchProfileVersionSerializer, 200: LaunchProfileVersionSerializer},
    )
    @action(detail=False, methods=["post"])
    def adopt(self, request: Request) -> Response:
        """Save a node's running engine flags (as its agent reports them) as the next version of
        a launch profile and make the node want it; the agent takes it without a restart. When
        the newest version of that name holds these very flags, none is made: 200 with it."""
        body = AdoptFlagsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        node, name = body.validated_data["node"], body.validated_data["name"]
        try:
            adoption = services.adopt_running_flags(node, name, user=request.user, request=request)
        except (ConfigError, ValueError) as exc:
            field = "node" if str(exc).startswith("node:") else "args"
            raise ValidationError({field: [str(exc)]}) from None
        data = LaunchProfileVersionSerializer(adoption.version, context={"request": request}).data
        # No identical version is made: 200 with the version that holds these flags already.
        code = status.HTTP_201_CREATED if adoption.created else status.HTTP_200_OK
        return Response(data, status=code)

    @extend_schema(
        responses={(200, "application/yaml"): OpenApiTypes.STR},
        description="Kubernetes manifests: PriorityClass, the engine StatefulSet (the agent "
        "in front of vLLM), Service and an autoscaling/v2 HorizontalPodAutoscaler, as one "
        "multi-document YAML.",
    )
    @action(detail=True, methods=["get"], renderer_classes=[YAMLRenderer])
    def kubernetes(self, request: Request, pk: str | None = None) -> Response:
        obj = self.get_object()
        return Response(render_yaml(obj.name, obj.launch_args(), version=obj.version))
