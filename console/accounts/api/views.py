from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from console.accounts import services
from console.accounts.api.serializers import ApiTokenSerializer, CreatedApiTokenSerializer
from console.accounts.models import ApiToken
from console.core.roles import ADMIN, VIEWER, has_role


class ApiTokenViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Your API tokens (admins: everyone's). Create returns the token once; revoke ends it."""

    serializer_class = ApiTokenSerializer
    required_role = VIEWER  # any signed-in user may hold tokens acting with their own role

    def get_queryset(self) -> QuerySet[ApiToken]:
        tokens = ApiToken.objects.select_related("user")
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return tokens.none()
        user = self.request.user
        if has_role(user, ADMIN):
            return tokens
        return tokens.filter(user=user) if isinstance(user, User) else tokens.none()

    @extend_schema(responses={201: CreatedApiTokenSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            token, plaintext = services.create_token(
                request.user, serializer.validated_data["name"], request=request
            )
        except services.TokenError as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        token.token = plaintext  # type: ignore[attr-defined]
        return Response(CreatedApiTokenSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=ApiTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        token = self.get_object()
        if not services.can_revoke(token, request.user):
            raise PermissionDenied("Only the token's owner or an admin can revoke it.")
        token = services.revoke_token(token, request.user, request)
        return Response(ApiTokenSerializer(token).data)
