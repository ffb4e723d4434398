"""Fleet models: Endpoint, Node, TelemetrySample, GatewayKey.

Rules that belong to one object live here (a node's status, an endpoint's masked key);
workflows that span objects and write audit events live in services.py and heartbeat.py.
Secrets never sit in plaintext on a row: endpoint keys are Fernet ciphertext, node tokens and
gateway keys are SHA-256 hex digests (crypto.py).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from console.fleet import crypto
from console.fleet.choices import EndpointKind, GpuSource, NodeMode
from console.fleet.status import node_status, open_errors
from console.fleet.urlrule import url_problem


def validate_base_url(value: str) -> None:
    """http(s) and a host (urlrule.url_problem)."""
    problem = url_problem(value)
    if problem is not None:
        raise ValidationError(problem)


ENDPOINT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def validate_endpoint_name(value: str) -> None:
    """Names go into URLs, env-file prefixes and command lines: no spaces or punctuation."""
    if not ENDPOINT_NAME_RE.match(value):
        raise ValidationError(
            "Use letters, digits, '.', '_' or '-' (no spaces), starting with a letter or digit."
        )


def base_url_hint(value: str) -> str:
    """A note for a base URL whose path does not end in /v1 (it still works: Tiergate adds
    /v1, as the OpenAI SDK expects it in the base URL)."""
    path = urlsplit(value).path.rstrip("/")
    if path.endswith("/v1"):
        return ""
    return (
        f"The base URL does not end in /v1: requests go to {value.rstrip('/')}/v1/... "
        "Run the connection doctor to confirm the working form."
    )


# A node that has not heartbeated for this long is shown stale (agents beat every 1-2 s).
STALE_AFTER = timedelta(seconds=10)


class Endpoint(models.Model):
    """An OpenAI-compatible model endpoint reached with one ("unified") key.

    kind=gateway: a node's Tiergate gateway (the console keeps one all-tier key per node for
    its own benchmarks; `node` says which). kind=vllm: an engine reached directly.
    kind=external: any other OpenAI-compatible service.
    """

    name = models.CharField(max_length=100, unique=True, validators=[validate_endpoint_name])
    base_url = models.CharField(
        max_length=500,
        validators=[validate_base_url],
        help_text="As the OpenAI SDK takes it, e.g. http://host:8000/v1",
    )
    api_key_encrypted = models.TextField(blank=True, editable=False, help_text="Fernet ciphertext")
    default_model = models.CharField(max_length=200, blank=True)
    kind = models.CharField(
        max_length=20, choices=EndpointKind.choices, default=EndpointKind.EXTERNAL
    )
    node = models.ForeignKey(
        "fleet.Node",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="endpoints",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Last, because the name shadows the `models` module for the rest of the class body.
    models = models.JSONField(default=list, blank=True, help_text="Model IDs, from /v1/models")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def set_api_key(self, plaintext: str) -> None:
        self.api_key_encrypted = crypto.encrypt(plaintext) if plaintext else ""

    def get_api_key(self) -> str:
        """The plaintext key, for outbound calls only: never log it or put it in a response."""
        return crypto.decrypt(self.api_key_encrypted) if self.api_key_encrypted else ""

    def model_to_use(self) -> str:
        """The model a request that names none goes to: the default, else the first known
        model, else the one the node's engine reports serving (a gateway endpoint)."""
        if self.default_model:
            return self.default_model
        if self.models:
            return str(self.models[0])
        engine = (self.node.engine or {}) if self.node is not None else {}
        return str(engine.get("model") or "")

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    @property
    def api_key_masked(self) -> str:
        if not self.api_key_encrypted:
            return ""
        try:
            return crypto.mask(self.get_api_key())
        except crypto.SecretUnreadable:
            return "(unreadable: encrypted with another key)"

    def audit_dict(self) -> dict[str, Any]:
        """What the audit log keeps of an endpoint: everything but the key itself."""
        return {
            "name": self.name,
            "base_url": self.base_url,
            "kind": self.kind,
            "models": list(self.models),
            "default_model": self.default_model,
            "node": self.node_id,
            "api_key": self.api_key_masked,
        }


class Node(models.Model):
    """A GPU node as its agent reports it, and the versions the console wants it to run.

    desired_* are set by admins and rollouts (services.set_desired); applied_* and everything
    below them are written only by the node's heartbeats.
    """

    name = models.SlugField(max_length=100, unique=True, help_text="Letters, digits, '-' and '_'.")
    labels = models.JSONField(
        default=list, blank=True, help_text="Free-form tags, e.g. ['h200', 'zone-a']"
    )
    token_sha256 = models.CharField(max_length=64, unique=True, editable=False)

    desired_tier_config = models.ForeignKey(
        "tuning.TierConfigVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    applied_tier_config = models.ForeignKey(
        "tuning.TierConfigVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    desired_launch_profile = models.ForeignKey(
        "tuning.LaunchProfileVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    applied_launch_profile = models.ForeignKey(
        "tuning.LaunchProfileVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    apply_errors = models.JSONField(
        default=dict, blank=True, help_text="Last failed apply per kind"
    )
    # Errors an operator acknowledged ({kind: the error as reported}): they no longer make the
    # node degraded; an acknowledgement lapses when the agent stops reporting that error.
    acknowledged_errors = models.JSONField(default=dict, blank=True)

    mode = models.CharField(
        max_length=10, choices=NodeMode.choices, blank=True, default=NodeMode.UNKNOWN
    )
    agent_version = models.CharField(max_length=40, blank=True)
    listen_url = models.CharField(max_length=300, blank=True, help_text="Where the gateway answers")
    engine = models.JSONField(default=dict, blank=True, help_text="url, model, simulated, args")
    engine_report = models.JSONField(
        default=dict,
        blank=True,
        help_text="The engine's version and the options its own parser accepts (agent-reported)",
    )
    health = models.JSONField(default=dict, blank=True, help_text="gateway, engine, detail")
    # The newest sample, copied here so the fleet page needs no telemetry query per node.
    last_sample = models.JSONField(default=dict, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    keys_version = models.CharField(
        max_length=64, blank=True, help_text="As last reported by the agent"
    )

    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def status(self, now: datetime | None = None) -> str:
        """What every page and the API show (console/fleet/status.py)."""
        return node_status(
            last_seen_at=self.last_seen_at,
            health=self.health,
            open_errors=self.open_apply_errors,
            now=now or timezone.now(),
            stale_after_s=STALE_AFTER.total_seconds(),
        )

    @property
    def open_apply_errors(self) -> dict[str, Any]:
        return open_errors(self.apply_errors, self.acknowledged_errors)

    @property
    def is_simulated(self) -> bool:
        return bool((self.engine or {}).get("simulated")) or (
            (self.last_sample or {}).get("gpu_source") == GpuSource.SIMULATED
        )

    @property
    def tier_config_drift(self) -> bool:
        return (
            self.desired_tier_config_id is not None
            and self.desired_tier_config_id != self.applied_tier_config_id
        )

    @property
    def launch_profile_drift(self) -> bool:
        return (
            self.desired_launch_profile_id is not None
            and self.desired_launch_profile_id != self.applied_launch_profile_id
        )

    def audit_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "labels": list(self.labels),
            "desired_tier_config": self.desired_tier_config_id,
            "desired_launch_profile": self.desired_launch_profile_id,
        }


class TelemetrySample(models.Model):
    """One second of one node, as its agent shipped it (docs/protocol.md).

    The JSON columns keep the sample whole; the float columns repeat the few figures that
    charts, rollouts' SLO guards and benchmarks filter or aggregate on, so those queries need
    no JSON functions (which differ between SQLite and PostgreSQL)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="samples")
    ts = models.DateTimeField()
    gpu_source = models.CharField(max_length=10, choices=GpuSource.choices)
    gpus = models.JSONField(default=list)
    engine = models.JSONField(default=dict)
    tiers = models.JSONField(default=dict)

    gpu_util = models.FloatField(null=True, help_text="Mean utilisation of the node's GPUs, 0-1")
    kv_cache_usage = models.FloatField(null=True, help_text="0-1")
    queue_depth = models.IntegerField(null=True, help_text="Gateway queue depth, all tiers")
    finished = models.IntegerField(
        null=True, help_text="Requests finished in the second, all tiers"
    )
    errors = models.IntegerField(null=True, help_text="Errors in the second, all tiers")
    ttft_p99_online_s = models.FloatField(
        null=True, help_text="TTFT P99 of the online tier, seconds"
    )

    class Meta:
        ordering = ["node", "ts"]
        constraints = [
            # A beat whose reply was lost is resent: the same second must not count twice.
            models.UniqueConstraint(fields=["node", "ts"], name="fleet_sample_node_ts"),
        ]
        indexes = [models.Index(fields=["ts"], name="fleet_sample_ts")]

    def __str__(self) -> str:
        return f"{self.node_id}@{self.ts.isoformat()}"


class GatewayKeyQuerySet(models.QuerySet):
    def active(self) -> GatewayKeyQuerySet:
        return self.filter(revoked_at__isnull=True)

    def for_node(self, node: Node) -> GatewayKeyQuerySet:
        return self.active().filter(Q(all_nodes=True) | Q(nodes=node)).distinct()


class GatewayKey(models.Model):
    """A key clients present to node gateways. Only its SHA-256 is kept: agents check a key
    with one hash, and the console hands them the hashes in heartbeat replies."""

    name = models.CharField(max_length=100)
    sha256 = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(
        max_length=12, editable=False, help_text="First 8 characters, for display"
    )
    last4 = models.CharField(
        max_length=4,
        blank=True,
        default="",
        editable=False,
        help_text="Last 4 characters, for display (empty for keys made before it was kept)",
    )
    tiers = models.JSONField(help_text="Tiers this key may use")
    default_tier = models.CharField(max_length=50)
    all_nodes = models.BooleanField(
        default=True, help_text="Valid on every node (else only on `nodes`)"
    )
    nodes = models.ManyToManyField(Node, blank=True, related_name="gateway_keys")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = GatewayKeyQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["name"],
                condition=Q(revoked_at__isnull=True),
                name="fleet_gatewaykey_active_name",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.masked})"

    @property
    def masked(self) -> str:
        """As an endpoint's key is shown (crypto.masked): `tgk_...95_I`. A key made before the
        last four were kept shows its first eight instead (`tgk_qF93...`)."""
        if not self.last4:
            return f"{self.prefix}..."
        return crypto.masked(self.prefix, self.last4)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def wire(self) -> dict[str, Any]:
        """The key as an agent receives it (docs/protocol.md, gateway_keys)."""
        return {
            "name": self.name,
            "sha256": self.sha256,
            "tiers": list(self.tiers),
            "default_tier": self.default_tier,
        }

    def audit_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "prefix": self.prefix,
            "masked": self.masked,
            "tiers": list(self.tiers),
            "default_tier": self.default_tier,
            "all_nodes": self.all_nodes,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
        }
