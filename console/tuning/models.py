"""Tier configs and launch profiles as immutable, numbered versions
(docs/architecture.md#tier-config and #rollouts-and-rollbacks).

A version is never edited: a change is a new row with the next number under the same name, so
anything that references a version (a node, a rollout) keeps meaning exactly what it meant.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from django.db import models

from console.tuning.diffs import DiffRow, launch_args_diff, tier_config_diff
from console.tuning.vllm_args import LaunchArgs, render_argv, render_command
from scheduler import TierConfig, parse_config, without_removed


class VersionedDocument(models.Model):
    name = models.SlugField(max_length=100, help_text="Letters, digits, '-' and '_'.")
    version = models.PositiveIntegerField(editable=False)
    message = models.CharField(max_length=500, blank=True, help_text="What changed and why.")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # The version this one was made from ("New version of this", a sweep's base, the profile a
    # node ran before its flags were saved): the page shows its changes against it, not against
    # whichever version happens to have the number before.
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The version this one was made from",
    )

    objects: ClassVar[models.Manager[Any]] = models.Manager()  # typed for the abstract base

    class Meta:
        abstract = True
        ordering = ["name", "-version"]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"

    def previous(self) -> VersionedDocument | None:
        """The version just before this one under the same name, if any."""
        return (
            type(self)
            .objects.filter(name=self.name, version__lt=self.version)
            .order_by("-version")
            .first()
        )

    def base(self) -> VersionedDocument | None:
        """What this version's changes are shown against: the version it was made from, else
        the one just before it under the same name."""
        parent = self.parent
        return parent if parent is not None else self.previous()

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Immutable: only the first save writes. Creating goes through services, which pick
        # the version number under a lock.
        if not self._state.adding:
            raise ValueError(f"{type(self).__name__} is immutable; create a new version instead")
        super().save(*args, **kwargs)


class TierConfigVersion(VersionedDocument):
    """A scheduler tier config (the JSON that scheduler.parse_config accepts)."""

    config = models.JSONField()

    class Meta(VersionedDocument.Meta):
        verbose_name = "tier config version"
        constraints = [
            models.UniqueConstraint(
                fields=["name", "version"], name="tuning_tierconfig_name_version"
            ),
        ]

    def parsed(self) -> TierConfig:
        """The scheduler's typed config (raises scheduler.ConfigError if the schema moved on);
        fields the schema has removed since the version was stored are left out, as the agent
        leaves them out when it applies the version."""
        return parse_config(without_removed(self.config)[0])

    def diff_from(self, older: TierConfigVersion | None) -> list[DiffRow]:
        """What changed going from `older` to this version (nothing when there is no older)."""
        return [] if older is None else tier_config_diff(older.config, self.config)


class LaunchProfileVersion(VersionedDocument):
    """A vLLM launch profile: snake_case `vllm serve` arguments (console.tuning.vllm_args)."""

    args = models.JSONField()

    class Meta(VersionedDocument.Meta):
        verbose_name = "launch profile version"
        constraints = [
            models.UniqueConstraint(
                fields=["name", "version"], name="tuning_launchprofile_name_version"
            ),
        ]

    def launch_args(self) -> LaunchArgs:
        # Types only: the cross-field rules were checked when the version was created, and a
        # rule added since must not make an existing, possibly running, version unrenderable.
        return LaunchArgs.model_validate(self.args)

    def argv(self) -> list[str]:
        """The exact `vllm serve ...` argv, for an agent that starts the engine."""
        return render_argv(self.launch_args())

    @property
    def command(self) -> str:
        return render_command(self.launch_args())

    def diff_from(self, older: LaunchProfileVersion | None) -> list[DiffRow]:
        return [] if older is None else launch_args_diff(older.args, self.args)


# Rollouts live in their own module; imported here so Django registers them with the app.
from console.tuning.rollouts.models import Rollout, RolloutEvent, RolloutNode  # noqa: E402

__all__ = [
    "LaunchProfileVersion",
    "Rollout",
    "RolloutEvent",
    "RolloutNode",
    "TierConfigVersion",
    "VersionedDocument",
]
