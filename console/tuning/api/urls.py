from __future__ import annotations

from console.core.routers import IdRouter
from console.tuning.api.views import LaunchProfileVersionViewSet, TierConfigVersionViewSet
from console.tuning.rollouts.api.views import RolloutViewSet

router = IdRouter(trailing_slash=True)
router.register("tier-configs", TierConfigVersionViewSet, basename="tierconfigversion")
router.register("launch-profiles", LaunchProfileVersionViewSet, basename="launchprofileversion")
router.register("rollouts", RolloutViewSet, basename="rollout")
urlpatterns = router.urls
