"""Node-token authentication for the agent API (docs/protocol.md).

`request.user` stays anonymous and `request.auth` is the Node: a node token grants the
heartbeat and nothing else, so it can never pass a role check elsewhere."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

from console.fleet.heartbeat import node_for_token
from console.fleet.models import Node


class NodeTokenAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[AnonymousUser, Node] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization: Bearer <node token> expected.")
        try:
            token = parts[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid node token.") from None
        node = node_for_token(token)
        if node is None:
            raise exceptions.AuthenticationFailed("Invalid node token.")
        return AnonymousUser(), node

    def authenticate_header(self, request: Any) -> str:
        return self.keyword


class IsAgentNode(BasePermission):
    message = "A node token is required."

    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.auth, Node)


class NodeTokenScheme(OpenApiAuthenticationExtension):
    target_class = "console.fleet.api.auth.NodeTokenAuthentication"
    name = "nodeToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "Node token (tgn_...)"}
