from __future__ import annotations

from console.bench.api.views import BenchmarkRunViewSet, RunSeriesViewSet
from console.bench.sweeps.api.urls import urlpatterns as sweep_urls
from console.core.routers import IdRouter

router = IdRouter(trailing_slash=True)
router.register("benchmarks", BenchmarkRunViewSet, basename="benchmarkrun")
router.register("benchmark-series", RunSeriesViewSet, basename="runseries")
urlpatterns = router.urls + sweep_urls
