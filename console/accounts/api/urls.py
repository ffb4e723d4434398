from __future__ import annotations

from rest_framework.routers import SimpleRouter

from console.accounts.api.views import ApiTokenViewSet

router = SimpleRouter(trailing_slash=True)
router.register("api-tokens", ApiTokenViewSet, basename="apitoken")
urlpatterns = router.urls
