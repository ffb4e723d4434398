"""The bench app: benchmark runs, their request samples, comparisons
(docs/architecture.md#benchmarks).

Kept out of console/bench/__init__.py on purpose: that package also holds the Django-free
load generator, which must import without Django configured."""

from __future__ import annotations

from django.apps import AppConfig


class BenchConfig(AppConfig):
    name = "console.bench"
    label = "bench"
    verbose_name = "Benchmarks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from console.bench.sweeps import guards, tasks  # noqa: F401  (tasks: Celery finds them)

        # No hand change, and no rollout, on a node while a sweep runs on it.
        guards.register()
