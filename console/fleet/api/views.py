"""Fleet REST API: endpoints, nodes, gateway keys (admins write, viewers read) and the
agents' heartbeat (node token)."""

from __future__ import annotations

from typing import Any, cast

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from pydantic import ValidationError as PydanticError
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.core.roles import ADMIN, OPERATOR
from console.fleet import desired, gateway_keys, heartbeat, probes, services
from console.fleet.api.auth import IsAgentNode, NodeTokenAuthentication
from console.fleet.api.serializers import (
    DoctorResultSerializer,
    EndpointSerializer,
    EnvExportSerializer,
    EnvImportSerializer,
    GatewayKeyCreatedSerializer,
    GatewayKeySerializer,
    NodeCreatedSerializer,
    NodeKindSerializer,
    NodeSerializer,
    NodeTokenSerializer,
)
from console.fleet.endpoint_models import keep_found_models
from console.fleet.envfile import render_env
from console.fleet.models import Endpoint, GatewayKey, Node
from console.fleet.schemas import MAX_BODY_BYTES, HeartbeatIn, HeartbeatOut, error_fields


class InUse(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "In use."
    default_code = "in_use"


def console_url(request: Request) -> str:
    return request.build_absolute_uri("/").rstrip("/")


class EndpointViewSet(viewsets.ModelViewSet):
    queryset = Endpoint.objects.select_related("node")
    serializer_class = EndpointSerializer
    required_role = ADMIN

    def perform_destroy(self, instance: Endpoint) -> None:
        try:
            services.delete_endpoint(instance, self.request.user, self.request)
        except services.FleetError as exc:
            raise InUse({exc.field: [exc.message]}) from None

    @extend_schema(request=None, responses={200: EndpointSerializer, 502: DoctorResultSerializer})
    @action(detail=True, methods=["post"], url_path="fetch-models")
    def fetch_models(self, request: Request, pk: str | None = None) -> Response:
        """Fetch the model IDs from the endpoint's /models and store them."""
        endpoint = self.get_object()
        try:
            _, ids = probes.fetch_models(endpoint.base_url, endpoint.get_api_key())
        except probes.FetchError as exc:
            return Response(
                {"ok": False, "steps": [exc.step.as_dict()]}, status=status.HTTP_502_BAD_GATEWAY
            )
        services.set_endpoint_models(endpoint, ids, request.user, request)
        return Response(self.get_serializer(endpoint).data)

    @extend_schema(request=None, responses=DoctorResultSerializer)
    @action(detail=True, methods=["post"], required_role=OPERATOR)
    def doctor(self, request: Request, pk: str | None = None) -> Response:
        """Test the connection: base URL with and without /v1, model list, one-token chat
        completions streamed and not; each failed step carries a plain-language fix. The
        models it finds are kept as the endpoint's `models`."""
        endpoint = self.get_object()
        steps, found = probes.diagnose(
            endpoint.base_url, endpoint.get_api_key(), endpoint.default_model
        )
        keep_found_models(endpoint, found, request.user, request)
        return Response({"ok": all(s.ok for s in steps), "steps": [s.as_dict() for s in steps]})

    @extend_schema(responses=EnvExportSerializer)
    @action(detail=True, methods=["get"])
    def env(self, request: Request, pk: str | None = None) -> Response:
        """The endpoint as `export` lines (seed convention), the key masked."""
        e = self.get_object()
        return Response(
            {
                "text": render_env(
                    e.name, e.base_url, e.api_key_masked, list(e.models), e.default_model
                )
            }
        )

    @extend_schema(request=EnvImportSerializer, responses={201: EndpointSerializer(many=True)})
    @action(detail=False, methods=["post"], url_path="import-env")
    def import_env(self, request: Request) -> Response:
        """Create or update (by name) one endpoint per prefix of BASE_URL / API_KEY / MODEL_*
        lines."""
        form = EnvImportSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            endpoints = services.import_env(
                form.validated_data["text"], request.user, request, kind=form.validated_data["kind"]
            )
        except (services.FleetError, ValueError) as exc:
            field = getattr(exc, "field", "text")
            raise ValidationError({field: [str(exc)]}) from None
        data = EndpointSerializer(endpoints, many=True, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED)


class NodeViewSet(viewsets.ModelViewSet):
    serializer_class = NodeSerializer
    required_role = ADMIN

    def get_queryset(self) -> QuerySet[Node]:
        return Node.objects.all()

    def get_serializer_class(self) -> Any:
        return NodeCreatedSerializer if self.action == "create" else NodeSerializer

    @extend_schema(responses={201: NodeCreatedSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Create a node; the reply holds its token and agent command lines, shown this once."""
        serializer = NodeSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        node = serializer.save()
        token = serializer.one_time_token
        data = {
            **NodeSerializer(node, context=self.get_serializer_context()).data,
            "token": token,
            "commands": services.agent_commands(console_url(request), token),
        }
        return Response(data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: Node) -> None:
        try:
            services.delete_node(instance, self.request.user, self.request)
        except services.FleetError as exc:
            raise InUse({exc.field: [exc.message]}) from None

    @extend_schema(request=NodeKindSerializer, responses=NodeSerializer)
    @action(detail=True, methods=["post"], url_path="unset-desired", required_role=OPERATOR)
    def unset_desired(self, request: Request, pk: str | None = None) -> Response:
        """Stop desiring a version of `kind` (tier_config or launch_profile) on this node: the
        agent keeps what it runs and drops its apply error of that kind. Audited."""
        return self._node_action(request, desired.unset_desired)

    @extend_schema(request=NodeKindSerializer, responses=NodeSerializer)
    @action(detail=True, methods=["post"], url_path="acknowledge-error", required_role=OPERATOR)
    def acknowledge_error(self, request: Request, pk: str | None = None) -> Response:
        """Acknowledge the node's current apply error of `kind`: it no longer makes the node
        degraded (a new failure shows again). Audited."""
        return self._node_action(request, desired.acknowledge_apply_error)

    def _node_action(self, request: Request, action: Any) -> Response:
        node = self.get_object()
        form = NodeKindSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            action(node, form.validated_data["kind"], request.user, request)
        except services.FleetError as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        node.refresh_from_db()
        return Response(NodeSerializer(node, context=self.get_serializer_context()).data)

    @extend_schema(request=None, responses=NodeTokenSerializer)
    @action(detail=True, methods=["post"], url_path="rotate-token")
    def rotate_token(self, request: Request, pk: str | None = None) -> Response:
        """A new node token (the old one stops working at once), shown this once."""
        token = services.rotate_node_token(self.get_object(), request.user, request)
        return Response(
            {"token": token, "commands": services.agent_commands(console_url(request), token)}
        )


class GatewayKeyViewSet(
    mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet
):
    """Gateway keys. No updates (a key's rights are what it was issued with: issue a new one);
    DELETE revokes like POST .../revoke/, keeping the row for the audit trail."""

    queryset = GatewayKey.objects.select_related("created_by").prefetch_related("nodes")
    serializer_class = GatewayKeySerializer
    required_role = ADMIN

    @extend_schema(responses={201: GatewayKeyCreatedSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Create a key; the reply holds the key itself, shown this once."""
        serializer = GatewayKeySerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        key = serializer.save()
        data = {
            **GatewayKeySerializer(key, context=self.get_serializer_context()).data,
            "key": serializer.one_time_key,
        }
        return Response(data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: GatewayKey) -> None:
        gateway_keys.revoke_gateway_key(instance, self.request.user, self.request)

    @extend_schema(request=None, responses=GatewayKeySerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        """Revoke the key: agents drop it on their next heartbeat."""
        key = gateway_keys.revoke_gateway_key(self.get_object(), request.user, request)
        return Response(self.get_serializer(key).data)


class HeartbeatView(APIView):
    """POST /api/v1/agent/heartbeat (docs/protocol.md)."""

    authentication_classes = [NodeTokenAuthentication]
    permission_classes = [IsAgentNode]

    @extend_schema(
        request=HeartbeatIn,
        responses={
            200: HeartbeatOut,
            400: OpenApiResponse(description="Field errors by path"),
            401: OpenApiResponse(description="Bad or unknown node token"),
            403: OpenApiResponse(description="The body names another node"),
            413: OpenApiResponse(description="Body over 1 MiB"),
        },
        operation_id="agent_heartbeat",
    )
    def post(self, request: Request) -> Response:
        raw = request.body
        if len(raw) > MAX_BODY_BYTES:
            return Response(
                {"detail": "Body over 1 MiB."}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
            )
        try:
            beat = HeartbeatIn.model_validate_json(raw)
        except PydanticError as exc:
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                raise ParseError("Body is not valid JSON.") from None
            return Response(error_fields(exc), status=status.HTTP_400_BAD_REQUEST)
        # IsAgentNode let only a Node through; DRF's stubs type request.auth as its own Token.
        node = cast(Node, request.auth)
        if not heartbeat.names_node(node, beat.node):
            return Response(
                {"node": ["This token belongs to another node."]}, status=status.HTTP_403_FORBIDDEN
            )
        return Response(heartbeat.process(node, beat))
