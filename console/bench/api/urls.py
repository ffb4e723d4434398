from __future__ import annotations

from console.bench.api.views import BenchmarkRunViewSet
from console.core.routers import IdRouter

router = IdRouter(trailing_slash=True)
router.register("benchmarks", BenchmarkRunViewSet, basename="benchmarkrun")
urlpatterns = router.urls
