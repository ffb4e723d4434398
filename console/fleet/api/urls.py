from __future__ import annotations

from django.urls import path

from console.core.routers import IdRouter
from console.fleet.api.views import EndpointViewSet, GatewayKeyViewSet, HeartbeatView, NodeViewSet

router = IdRouter(trailing_slash=True)
router.register("endpoints", EndpointViewSet, basename="endpoint")
router.register("nodes", NodeViewSet, basename="node")
router.register("gateway-keys", GatewayKeyViewSet, basename="gatewaykey")
urlpatterns = [
    path("agent/heartbeat", HeartbeatView.as_view(), name="agent-heartbeat"),
    *router.urls,
]
