from __future__ import annotations

from rest_framework.routers import SimpleRouter

from console.bench.api.views import BenchmarkRunViewSet, RunSeriesViewSet

router = SimpleRouter(trailing_slash=True)
router.register("benchmarks", BenchmarkRunViewSet, basename="benchmarkrun")
router.register("benchmark-series", RunSeriesViewSet, basename="runseries")
urlpatterns = router.urls
