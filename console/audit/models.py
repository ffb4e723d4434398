from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.db import models
from django.urls import NoReverseMatch, reverse

from console.audit.choices import Action


class AuditEvent(models.Model):
    """One change. Append-only: rows are never edited, so the admin shows them read-only.

    `actor_name` is kept beside the foreign key so the record survives the user's deletion."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
    )
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=20, choices=Action.choices, db_index=True)
    object_type = models.CharField(max_length=60, db_index=True)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=200, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    source_ip = models.GenericIPAddressField(null=True, blank=True)
    message = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.actor_name or 'system'} {self.action} {self.object_type} {self.object_repr}"

    @property
    def object_label(self) -> str:
        """ "endpoint", "tier config version"...: the model's name rather than its label."""
        try:
            return str(apps.get_model(self.object_type)._meta.verbose_name)
        except (LookupError, ValueError):
            return self.object_type

    def object_url(self) -> str | None:
        """The page of the object the event is about, where it has one."""
        name = OBJECT_PAGES.get(self.object_type)
        if name is None or not self.object_id.isascii() or not self.object_id.isdigit():
            return None
        try:
            if name.startswith("!"):
                return reverse(name[1:])
            return reverse(name, args=[int(self.object_id)])
        except NoReverseMatch:
            return None


# Object types (app_label.model) to the URL name of their page. A leading "!" means a list page
# without an id (gateway keys have no page of their own).
OBJECT_PAGES = {
    "fleet.node": "fleet:node-detail",
    "fleet.endpoint": "fleet:endpoint-detail",
    "fleet.gatewaykey": "!fleet:key-list",
    "tuning.tierconfigversion": "tuning:tierconfig-detail",
    "tuning.launchprofileversion": "tuning:launchprofile-detail",
    "tuning.rollout": "tuning:rollout-detail",
    "bench.benchmarkrun": "bench:run-detail",
    "bench.runseries": "!bench:run-list",
    "playground.comparison": "playground:detail",
    "accounts.apitoken": "!accounts:token-list",
}
