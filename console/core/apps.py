from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "console.core"
    label = "core"
    verbose_name = "Tiergate core"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        import console.celery  # noqa: F401  (binds @shared_task to the Tiergate app)
        from console.core.roles import ensure_role_groups

        post_migrate.connect(lambda **_: ensure_role_groups(), sender=self, weak=False)
