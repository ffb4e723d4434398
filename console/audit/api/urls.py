from __future__ import annotations

from console.audit.api.views import AuditEventViewSet
from console.core.routers import IdDefaultRouter

router = IdDefaultRouter(trailing_slash=True)
router.register("audit-events", AuditEventViewSet, basename="auditevent")
urlpatterns = router.urls
