from __future__ import annotations

from rest_framework.routers import DefaultRouter

from console.audit.api.views import AuditEventViewSet

router = DefaultRouter(trailing_slash=True)
router.register("audit-events", AuditEventViewSet, basename="auditevent")
urlpatterns = router.urls
