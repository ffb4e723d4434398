from __future__ import annotations

from rest_framework.routers import SimpleRouter

from console.tuning.api.views import LaunchProfileVersionViewSet, TierConfigVersionViewSet
from console.tuning.rollouts.api.views import RolloutViewSet

router = SimpleRouter(trailing_slash=True)
router.register("tier-configs", TierConfigVersionViewSet, basename="tierconfigversion")
router.register("launch-profiles", LaunchProfileVersionViewSet, basename="launchprofileversion")
router.register("rollouts", RolloutViewSet, basename="rollout")
urlpatterns = router.urls
