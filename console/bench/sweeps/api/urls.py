from __future__ import annotations

from console.bench.sweeps.api.views import SweepTrialViewSet, SweepViewSet
from console.core.routers import IdRouter

router = IdRouter(trailing_slash=True)
router.register("sweeps", SweepViewSet, basename="sweep")
router.register("sweep-trials", SweepTrialViewSet, basename="sweeptrial")
urlpatterns = router.urls
