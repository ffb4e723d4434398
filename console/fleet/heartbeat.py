"""The console side of the heartbeat (docs/protocol.md): store what the agent sent, reply with
what it should run.

Hot path: every agent calls it every second (a scale test runs 100 agents). So: the node and
its desired versions come from one select_related query (done by authentication), the active
keys from one query, and the writes (samples and node state) share one short transaction:
one bulk INSERT and one UPDATE. Anything rarer (a new applied version, a new listen URL)
costs more only on the beat where it happens.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.fleet.crypto import sha256_hex
from console.fleet.models import GatewayKey, Node, TelemetrySample
from console.fleet.schemas import HeartbeatIn, SampleIn
from console.fleet.status import kept_acknowledgements, relevant_errors
from console.fleet.versions import desired_reply, known_version


def heartbeat_interval_s() -> float:
    return float(getattr(settings, "TIERGATE_HEARTBEAT_INTERVAL_S", 1.0))


# What a beat reads of the node row. The JSON columns it only overwrites are left unread, and
# the desired versions' content is fetched only on the rare beat that must carry it.
_BEAT_FIELDS = (
    "id",
    "name",
    "listen_url",
    "desired_tier_config_id",
    "applied_tier_config_id",
    "desired_launch_profile_id",
    "applied_launch_profile_id",
    "acknowledged_errors",
)


def node_for_token(token: str) -> Node | None:
    """The node whose token this is (only the columns a beat needs), or None."""
    if not token:
        return None
    return Node.objects.only(*_BEAT_FIELDS).filter(token_sha256=sha256_hex(token)).first()


def names_node(node: Node, claimed: str | int | None) -> bool:
    """Whether the body's optional `node` field (name or id) names the token's node."""
    if claimed is None:
        return True
    if isinstance(claimed, int):
        return claimed == node.pk
    return claimed in (node.name, str(node.pk))


# --- gateway keys --------------------------------------------------------------------------


def _keys_sql() -> str:
    keys, scope = GatewayKey._meta.db_table, GatewayKey.nodes.through._meta.db_table
    return (
        f"SELECT name, sha256, tiers, default_tier FROM {keys} WHERE revoked_at IS NULL"
        f" AND (all_nodes = %s OR id IN (SELECT gatewaykey_id FROM {scope} WHERE node_id = %s))"
        " ORDER BY sha256"
    )


def keys_for_node(node: Node) -> list[dict[str, Any]]:
    """The active keys valid on this node, as agents receive them, in a stable order.

    Plain SQL: it runs on every beat, and building the ORM query cost more than running it.
    Equivalent to GatewayKey.objects.for_node(node)."""
    with connection.cursor() as cursor:
        cursor.execute(_keys_sql(), [True, node.pk])
        rows = cursor.fetchall()
    return [
        {
            "name": name,
            "sha256": digest,
            "tiers": list(tiers if isinstance(tiers, list) else json.loads(tiers)),
            "default_tier": default_tier,
        }
        for name, digest, tiers, default_tier in rows
    ]


def keys_version(keys: list[dict[str, Any]]) -> str:
    """A digest of the key set: equal digests mean the agent's keys are current."""
    blob = json.dumps(keys, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


# --- samples --------------------------------------------------------------------------------


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _sum(values: list[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def sample_row(node_id: int, sample: SampleIn) -> TelemetrySample:
    tiers = sample.tiers
    online = tiers.get("online")
    return TelemetrySample(
        node_id=node_id,
        ts=datetime.fromtimestamp(sample.ts, tz=UTC),
        gpu_source=sample.gpu_source,
        gpus=[g.model_dump() for g in sample.gpus],
        engine=sample.engine.model_dump(),
        tiers={name: t.model_dump() for name, t in tiers.items()},
        gpu_util=_mean([g.util for g in sample.gpus if g.util is not None]),
        kv_cache_usage=sample.engine.kv_cache_usage,
        queue_depth=_sum([t.depth for t in tiers.values()]),
        finished=_sum([t.finished for t in tiers.values()]),
        errors=_sum([t.errors for t in tiers.values()]),
        ttft_p99_online_s=online.ttft_p99_s if online is not None else None,
    )


def summary_of(row: TelemetrySample) -> dict[str, Any]:
    """What the fleet page shows of the newest sample (kept on the node row)."""
    return {
        "ts": row.ts.isoformat(),
        "gpu_source": row.gpu_source,
        "gpu_util": row.gpu_util,
        "kv_cache_usage": row.kv_cache_usage,
        "queue_depth": row.queue_depth,
        "tiers": {
            name: {
                "depth": t.get("depth"),
                "in_flight": t.get("in_flight"),
                "ttft_p99_s": t.get("ttft_p99_s"),
            }
            for name, t in row.tiers.items()
        },
        "gpus": len(row.gpus),
    }


# A tier config is hot-applied within milliseconds: the beat that carries one asks for the next
# beat this soon, so a rollout's wave is confirmed in about one interval instead of two.
FOLLOW_UP_INTERVAL_S = 0.2


def follow_up_interval(desired: dict[str, Any], beat: HeartbeatIn) -> float:
    interval = heartbeat_interval_s()
    tier = desired.get("tier_config")
    if tier is None or "config" not in tier:
        return interval
    refused = beat.apply_errors.get("tier_config")
    if refused is not None and refused.version == tier["id"]:
        return interval  # the agent refuses this version: hurrying it changes nothing
    return min(interval, FOLLOW_UP_INTERVAL_S)


# --- the beat -------------------------------------------------------------------------------


def process(node: Node, beat: HeartbeatIn, now: datetime | None = None) -> dict[str, Any]:
    """Store one heartbeat and build the reply. `node` comes from node_for_token."""
    now = now or timezone.now()
    rows = [sample_row(node.pk, s) for s in beat.samples]
    errors = relevant_errors(
        {kind: e.model_dump() for kind, e in beat.apply_errors.items()},
        {
            "tier_config": node.desired_tier_config_id,
            "launch_profile": node.desired_launch_profile_id,
        },
    )
    applied_tier = known_version(
        "applied_tier_config", beat.applied.tier_config, node.applied_tier_config_id
    )
    applied_profile = known_version(
        "applied_launch_profile", beat.applied.launch_profile, node.applied_launch_profile_id
    )
    changes: dict[str, Any] = {
        "mode": beat.mode,
        "agent_version": beat.agent_version,
        "listen_url": beat.listen_url,
        "engine": beat.engine.model_dump(exclude={"report"}),
        "health": beat.health.model_dump(),
        "apply_errors": errors,
        "keys_version": beat.keys_version,
        "last_seen_at": now,
        "applied_tier_config_id": applied_tier,
        "applied_launch_profile_id": applied_profile,
    }
    if rows:
        changes["last_sample"] = summary_of(max(rows, key=lambda r: r.ts))
    if node.acknowledged_errors:
        kept = kept_acknowledgements(node.acknowledged_errors, errors)
        if kept != node.acknowledged_errors:
            changes["acknowledged_errors"] = kept
    if beat.engine.report is not None:
        changes["engine_report"] = beat.engine.report.model_dump()
    elif beat.engine.report_digest is None and beat.engine.url:
        changes["engine_report"] = {}  # the engine has none (attached, or not a Python one)
    keys = keys_for_node(node)
    version = keys_version(keys)
    applied_before = (node.applied_tier_config_id, node.applied_launch_profile_id)
    listen_changed = bool(beat.listen_url) and beat.listen_url != node.listen_url
    # The engine's model, once known or when it changes, goes into the node's gateway endpoint's
    # models (services.sync_gateway_models), so the playground and benchmarks find it.
    model_before = str((node.engine or {}).get("model") or "")
    model_changed = bool(beat.engine.model) and beat.engine.model != model_before

    with transaction.atomic():
        if rows:
            TelemetrySample.objects.bulk_create(rows, ignore_conflicts=True)
        Node.objects.filter(pk=node.pk).update(**changes)
        for field, value in changes.items():
            setattr(node, field, value)
        if (applied_tier, applied_profile) != applied_before:
            record(
                action=Action.UPDATE,
                obj=node,
                message="agent reported newly applied versions",
                before={
                    "applied_tier_config": applied_before[0],
                    "applied_launch_profile": applied_before[1],
                },
                after={
                    "applied_tier_config": applied_tier,
                    "applied_launch_profile": applied_profile,
                },
            )
        if listen_changed:
            from console.fleet.services import ensure_gateway_endpoint

            ensure_gateway_endpoint(node)
            keys = keys_for_node(node)  # ensure_gateway_endpoint may have added the node's key
            version = keys_version(keys)
        if model_changed:
            from console.fleet.endpoint_models import sync_gateway_models

            sync_gateway_models(node, previous=model_before)

    desired = desired_reply(node, applied_tier, applied_profile)
    reply: dict[str, Any] = {
        "node": {"id": node.pk, "name": node.name},
        "heartbeat_interval_s": follow_up_interval(desired, beat),
        "desired": desired,
        "keys_version": version,
        # The engine report held: the agent sends its report again only when it differs.
        "engine_report_digest": (node.engine_report or {}).get("digest"),
    }
    if beat.keys_version != version:
        reply["gateway_keys"] = keys
    return reply
