"""API tokens. Only the SHA-256 of a token is stored: tokens are 32 random bytes, so an unsalted
hash is enough, and the API checks a presented token with one hash and one indexed lookup."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q

TOKEN_PREFIX = "tgt_"
# Writing last_used_at on every request would turn every API read into a write; once a minute
# is precise enough for "is this token still in use?".
LAST_USED_RESOLUTION = timedelta(seconds=60)


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'ci-nightly'")
    sha256 = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=12, editable=False, help_text="For telling tokens apart")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["revoked_at", "-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "name"],
                condition=Q(revoked_at__isnull=True),
                name="accounts_active_token_name_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}...)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None
