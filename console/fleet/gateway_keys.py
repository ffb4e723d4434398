"""Gateway keys: the unified keys clients send to a node's gateway. Each workflow writes its
audit event in the same transaction as its change; a key's plaintext is returned once, to its
creator, and only its SHA-256 is stored.

    create_gateway_key(name, tiers, default_tier, user, nodes=None, request=None)
        -> (GatewayKey, key)
    revoke_gateway_key(key, user, request=None) -> GatewayKey
    allowed_tiers() -> set[str]
    check_tiers(tiers, default_tier) -> None          (FleetError naming the field)
    node_key_name(node) -> str
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.fleet import crypto
from console.fleet.errors import FleetError
from console.fleet.models import GatewayKey, Node
from console.fleet.versions import desired_tier_names


def allowed_tiers() -> set[str]:
    """Tier names a key may name: the usual three and every queue of a desired tier config."""
    return desired_tier_names()


def check_tiers(tiers: list[str], default_tier: str) -> None:
    if not tiers:
        raise FleetError("tiers", "name at least one tier")
    unknown = sorted(set(tiers) - allowed_tiers())
    if unknown:
        raise FleetError("tiers", f"unknown tier(s): {', '.join(unknown)}")
    if default_tier not in tiers:
        raise FleetError("default_tier", f"must be one of the key's tiers ({', '.join(tiers)})")


def create_gateway_key(
    name: str,
    tiers: list[str],
    default_tier: str,
    user: Any,
    nodes: list[Node] | None = None,
    request: HttpRequest | None = None,
    check: bool = True,
) -> tuple[GatewayKey, str]:
    """A new key, valid on `nodes` (None or empty: every node). The plaintext is returned
    once and never stored."""
    if check:
        check_tiers(tiers, default_tier)
    if GatewayKey.objects.active().filter(name=name).exists():
        raise FleetError("name", "an active key with this name exists")
    plaintext = crypto.new_gateway_key()
    key = GatewayKey(
        name=name,
        sha256=crypto.sha256_hex(plaintext),
        prefix=plaintext[:8],
        last4=plaintext[-4:],
        tiers=list(tiers),
        default_tier=default_tier,
        all_nodes=not nodes,
        created_by=user,
    )
    with transaction.atomic():
        key.save()
        if nodes:
            key.nodes.set(nodes)
        after = {**key.audit_dict(), "nodes": [n.pk for n in nodes or []]}
        record(action=Action.CREATE, obj=key, after=after, user=user, request=request)
    return key, plaintext


def revoke_gateway_key(
    key: GatewayKey, user: Any, request: HttpRequest | None = None
) -> GatewayKey:
    if key.revoked_at is not None:
        return key
    before = key.audit_dict()
    with transaction.atomic():
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        record(
            action=Action.UPDATE,
            obj=key,
            before=before,
            after=key.audit_dict(),
            user=user,
            request=request,
            message="key revoked",
        )
    return key


def node_key_name(node: Node) -> str:
    """The name of the key the console holds for its own endpoint on `node`'s gateway."""
    return f"console-{node.name}"
