"""Fleet workflows. Views, viewsets, seeders, commands and tasks all call these; each one
writes its audit event in the same transaction as its change, and none ever returns or
records a plaintext secret except the one-time `token` / `key` a creator must see.

    create_endpoint(user, request=None, **fields) -> Endpoint
    update_endpoint(endpoint, user, request=None, **fields) -> Endpoint     (api_key="" keeps it)
    delete_endpoint(endpoint, user, request=None) -> None
    import_env(text, user, request=None, kind="external") -> list[Endpoint]
    create_node(name, labels, user, request=None) -> (Node, token)
    rotate_node_token(node, user, request=None) -> token
    update_node(node, user, request=None, **fields) -> Node
    delete_node(node, user, request=None) -> None
    set_desired(nodes, tier_config=None, launch_profile=None, user=None, reason="") -> list[Node]
    (unsetting desired versions and acknowledging apply errors: console/fleet/desired.py)
    ensure_gateway_endpoint(node) -> Endpoint | None
    (the models an endpoint serves, as the engine or the doctor found them:
    console/fleet/endpoint_models.py)
    agent_commands(console_url, token) -> dict[str, str]
    (gateway keys: console/fleet/gateway_keys.py; FleetError, which every workflow raises
    naming the field to fix: console/fleet/errors.py)
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError
from django.http import HttpRequest

from console.audit.choices import Action
from console.audit.services import record
from console.core.tiers import tier_sort_key
from console.fleet import crypto
from console.fleet.choices import EndpointKind
from console.fleet.envfile import parse_env
from console.fleet.errors import FleetError
from console.fleet.gateway_keys import (
    allowed_tiers,
    create_gateway_key,
    node_key_name,
    revoke_gateway_key,
)
from console.fleet.models import (
    Endpoint,
    GatewayKey,
    Node,
    validate_base_url,
    validate_endpoint_name,
)

ENDPOINT_FIELDS = ("name", "base_url", "models", "default_model", "kind", "node")


# --- endpoints --------------------------------------------------------------------------------


def _check_base_url(fields: dict[str, Any]) -> None:
    """Every write path gets the model's name and URL rules (forms and serializers check them
    too, but an env import or a caller in code must not store what a form would refuse)."""
    if "name" in fields:
        try:
            validate_endpoint_name(fields["name"])
        except ValidationError as exc:
            raise FleetError("name", f"{fields['name']!r}: {exc.messages[0]}") from exc
    if "base_url" in fields:
        try:
            validate_base_url(fields["base_url"])
        except ValidationError as exc:
            raise FleetError("base_url", f"{fields['base_url']!r}: {exc.messages[0]}") from exc


def create_endpoint(
    user: Any, request: HttpRequest | None = None, *, api_key: str = "", **fields: Any
) -> Endpoint:
    _check_base_url(fields)
    endpoint = Endpoint(**{k: v for k, v in fields.items() if k in ENDPOINT_FIELDS})
    endpoint.set_api_key(api_key)
    with transaction.atomic():
        endpoint.save()
        record(
            action=Action.CREATE,
            obj=endpoint,
            after=endpoint.audit_dict(),
            user=user,
            request=request,
        )
    return endpoint


def update_endpoint(
    endpoint: Endpoint,
    user: Any,
    request: HttpRequest | None = None,
    *,
    api_key: str | None = None,
    **fields: Any,
) -> Endpoint:
    """Change the given fields; a non-empty api_key replaces the key (it is never read back)."""
    _check_base_url(fields)
    before = endpoint.audit_dict()
    for name, value in fields.items():
        if name in ENDPOINT_FIELDS:
            setattr(endpoint, name, value)
    if api_key:
        endpoint.set_api_key(api_key)
    with transaction.atomic():
        endpoint.save()
        after = endpoint.audit_dict()
        message = "API key replaced" if api_key else ""
        record(
            action=Action.UPDATE,
            obj=endpoint,
            before=before,
            after=after,
            user=user,
            request=request,
            message=message,
        )
    return endpoint


def delete_endpoint(endpoint: Endpoint, user: Any, request: HttpRequest | None = None) -> None:
    """Delete the endpoint; refused (FleetError, nothing written) while benchmark runs refer
    to it: they keep their record of what they measured."""
    try:
        with transaction.atomic():
            record(
                action=Action.DELETE,
                obj=endpoint,
                before=endpoint.audit_dict(),
                user=user,
                request=request,
            )
            endpoint.delete()
    except ProtectedError as exc:
        raise FleetError(
            "endpoint",
            f"{endpoint.name} is used by {len(exc.protected_objects)} benchmark run(s), which "
            "keep it for their record; it cannot be deleted",
        ) from None


def set_endpoint_models(
    endpoint: Endpoint, model_ids: list[str], user: Any, request: HttpRequest | None = None
) -> Endpoint:
    """Store fetched model IDs; the default model becomes the first one if it is not among them."""
    default = (
        endpoint.default_model
        if endpoint.default_model in model_ids
        else (model_ids[0] if model_ids else "")
    )
    return update_endpoint(endpoint, user, request, models=model_ids, default_model=default)


def import_env(
    text: str, user: Any, request: HttpRequest | None = None, kind: str = EndpointKind.EXTERNAL
) -> list[Endpoint]:
    """Create (or update, by name) one endpoint per prefix found in the env text."""
    found = parse_env(text)
    if not found:
        raise FleetError("text", "no endpoint found: expected lines like `export X_BASE_URL=...`")
    out: list[Endpoint] = []
    with transaction.atomic():
        for item in found:
            fields = {
                "base_url": item.base_url,
                "models": item.model_ids,
                "default_model": item.default_model,
                "kind": kind,
            }
            existing = Endpoint.objects.filter(name=item.name).first()
            try:
                if existing is None:
                    out.append(
                        create_endpoint(
                            user, request, name=item.name, api_key=item.api_key, **fields
                        )
                    )
                else:
                    out.append(
                        update_endpoint(existing, user, request, api_key=item.api_key, **fields)
                    )
            except FleetError as exc:  # the whole import is rolled back; say which entry
                raise FleetError("text", f"{item.name}: {exc.message}") from exc
    return out


# --- nodes ------------------------------------------------------------------------------------


def agent_commands(console_url: str, token: str) -> dict[str, str]:
    """The exact command lines that start this node's agent
    (docs/architecture.md#stable-interfaces)."""
    base = [
        "python",
        "-m",
        "gpu_agent",
        "--console",
        console_url.rstrip("/"),
        "--node-token",
        token,
    ]
    attached = [*base, "--engine-url", "http://127.0.0.1:8001", "--listen", "0.0.0.0:9100"]
    managed = [*base, "--engine-cmd", "vllm serve MODEL --port 8001", "--listen", "0.0.0.0:9100"]
    return {"attached": shlex.join(attached), "managed": shlex.join(managed)}


def create_node(
    name: str, labels: list[str], user: Any, request: HttpRequest | None = None
) -> tuple[Node, str]:
    token = crypto.new_node_token()
    node = Node(name=name, labels=labels, token_sha256=crypto.sha256_hex(token))
    with transaction.atomic():
        node.save()
        record(action=Action.CREATE, obj=node, after=node.audit_dict(), user=user, request=request)
    return node, token


def rotate_node_token(node: Node, user: Any, request: HttpRequest | None = None) -> str:
    """A new token; the old one stops working at once (the agent must be restarted with it)."""
    token = crypto.new_node_token()
    with transaction.atomic():
        Node.objects.filter(pk=node.pk).update(token_sha256=crypto.sha256_hex(token))
        node.token_sha256 = crypto.sha256_hex(token)
        record(
            action=Action.UPDATE, obj=node, user=user, request=request, message="node token rotated"
        )
    return token


# Why a node's desired versions may not be changed by hand right now, asked of every app that
# can own them: each check returns the reason or None. The tuning app adds its rollouts' (a
# running rollout would wait for, or restore, the wrong thing) and the bench app its sweeps' in
# their AppConfig.ready, so the dependency stays one way, tuning/bench -> fleet.
HAND_CHANGE_CHECKS: list[Callable[[Node], str | None]] = []


def check_hand_change(node: Node, field: str = "kind") -> None:
    for check in HAND_CHANGE_CHECKS:
        reason = check(node)
        if reason is not None:
            raise FleetError(field, reason)


def update_node(node: Node, user: Any, request: HttpRequest | None = None, **fields: Any) -> Node:
    """Name, labels and desired versions change together or not at all."""
    with transaction.atomic():
        for name in ("desired_tier_config", "desired_launch_profile"):
            if name in fields:
                value = getattr(fields[name], "pk", fields[name])
                if value != getattr(node, f"{name}_id"):
                    check_hand_change(node, name)
        before = node.audit_dict()
        for name in ("name", "labels"):
            if name in fields:
                setattr(node, name, fields[name])
        node.save(update_fields=["name", "labels"])
        record(
            action=Action.UPDATE,
            obj=node,
            before=before,
            after=node.audit_dict(),
            user=user,
            request=request,
        )
        if "desired_tier_config" in fields or "desired_launch_profile" in fields:
            set_desired(
                [node],
                tier_config=fields.get("desired_tier_config"),
                launch_profile=fields.get("desired_launch_profile"),
                user=user,
                reason="set by hand",
                request=request,
            )
            # An explicit null stops wanting that kind (the agent keeps what it applied).
            cleared = [
                name
                for name in ("desired_tier_config", "desired_launch_profile")
                if name in fields
                and fields[name] is None
                and getattr(node, f"{name}_id") is not None
            ]
            if cleared:
                before = node.audit_dict()
                for name in cleared:
                    setattr(node, name, None)
                node.save(update_fields=cleared)
                record(
                    action=Action.UPDATE,
                    obj=node,
                    before=before,
                    after=node.audit_dict(),
                    user=user,
                    request=request,
                    message="desired versions cleared",
                )
    return node


def delete_node(node: Node, user: Any, request: HttpRequest | None = None) -> None:
    """Delete the node with its samples; its console-held gateway key is revoked and its
    gateway endpoint removed (kept, unlinked, if benchmarks still refer to it). Refused
    (FleetError, nothing written) while records that keep the node refer to it (sweeps)."""
    try:
        with transaction.atomic():
            record(
                action=Action.DELETE, obj=node, before=node.audit_dict(), user=user, request=request
            )
            for key in GatewayKey.objects.active().filter(
                all_nodes=False, nodes=node, name=node_key_name(node)
            ):
                revoke_gateway_key(key, user, request)
            for endpoint in Endpoint.objects.filter(node=node, kind=EndpointKind.GATEWAY):
                # Kept, unlinked, while benchmark runs refer to it.
                with contextlib.suppress(FleetError):
                    delete_endpoint(endpoint, user, request)
            node.delete()
    except ProtectedError as exc:
        raise FleetError(
            "node",
            f"{node.name} is used by {len(exc.protected_objects)} record(s) (sweeps), which keep "
            "it; it cannot be deleted",
        ) from None


def set_desired(
    nodes: Iterable[Node],
    tier_config: Any = None,
    launch_profile: Any = None,
    user: Any = None,
    reason: str = "",
    request: HttpRequest | None = None,
) -> list[Node]:
    """Make these nodes want the given versions (None: leave that kind as it is).

    For rollouts and rollbacks: one audit event per node whose desire changed, all in one
    transaction; agents pick the change up on their next beat. Returns the nodes changed."""
    changed: list[Node] = []
    with transaction.atomic():
        for node in nodes:
            before = {
                "desired_tier_config": node.desired_tier_config_id,
                "desired_launch_profile": node.desired_launch_profile_id,
            }
            fields: list[str] = []
            if tier_config is not None and node.desired_tier_config_id != tier_config.pk:
                node.desired_tier_config = tier_config
                fields.append("desired_tier_config")
            if launch_profile is not None and node.desired_launch_profile_id != launch_profile.pk:
                node.desired_launch_profile = launch_profile
                fields.append("desired_launch_profile")
            if not fields:
                continue
            node.save(update_fields=fields)
            record(
                action=Action.UPDATE,
                obj=node,
                before=before,
                user=user,
                request=request,
                after={
                    "desired_tier_config": node.desired_tier_config_id,
                    "desired_launch_profile": node.desired_launch_profile_id,
                },
                message=f"desired versions set: {reason}" if reason else "desired versions set",
            )
            changed.append(node)
    return changed


# --- the console's own gateway endpoint -----------------------------------------------------


def ensure_gateway_endpoint(node: Node) -> Endpoint | None:
    """The console's own all-tier endpoint for this node's gateway
    (docs/architecture.md#the-request-path): created with a fresh key the first time the node
    reports a listen URL, repointed when the URL moves."""
    if not node.listen_url:
        return None
    base_url = node.listen_url.rstrip("/") + "/v1"
    endpoint = Endpoint.objects.filter(node=node, kind=EndpointKind.GATEWAY).first()
    if endpoint is not None:
        if endpoint.base_url != base_url:
            update_endpoint(endpoint, None, base_url=base_url)
        return endpoint
    model = str((node.engine or {}).get("model") or "")
    tiers = sorted(allowed_tiers())
    default = min(tiers, key=tier_sort_key)  # the most urgent of the seed's tiers
    with transaction.atomic():
        for old in GatewayKey.objects.active().filter(name=node_key_name(node)):
            revoke_gateway_key(old, None)
        _, plaintext = create_gateway_key(
            node_key_name(node), tiers, default, None, nodes=[node], check=False
        )
        name = f"{node.name}-gateway"
        if Endpoint.objects.filter(name=name).exists():
            name = f"{name}-{node.pk}"
        return create_endpoint(
            None,
            name=name,
            base_url=base_url,
            api_key=plaintext,
            kind=EndpointKind.GATEWAY,
            node=node,
            models=[model] if model else [],
            default_model=model,
        )
