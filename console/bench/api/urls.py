from __future__ import annotations

from rest_framework.routers import SimpleRouter

from console.bench.api.views import BenchmarkRunViewSet

router = SimpleRouter(trailing_slash=True)
router.register("benchmarks", BenchmarkRunViewSet, basename="benchmarkrun")
urlpatterns = router.urls
