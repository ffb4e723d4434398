"""Creating versions: validate, number, store and audit in one transaction.

Views, the API, the demo seeder and (later) rollouts all create versions through here, so the
rules (validation by the one schema, the next number per name, an audit row) hold everywhere.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.http import HttpRequest

from console.audit.choices import Action
from console.audit.services import record
from console.fleet.models import Node
from console.fleet.services import set_desired
from console.tuning import tasks
from console.tuning.models import LaunchProfileVersion, TierConfigVersion, VersionedDocument
from console.tuning.vllm_args import LaunchArgs, args_to_dict, validate_args
from scheduler import config_to_dict, parse_config

V = TypeVar("V", bound=VersionedDocument)

# Two writers creating the same name at once both read the same highest number; the unique
# constraint refuses the second, which then simply takes the next number.
_ATTEMPTS = 5


def _lock_name(model: type[Any], name: str) -> None:
    """Serialise writers of one name for the rest of the transaction. PostgreSQL: an advisory
    lock (without it, N racing writers need up to N-1 retries each). SQLite already serialises
    writers (transactions begin IMMEDIATE, see settings)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{model._meta.label}:{name}"]
            )


def _create_version(
    model: type[V],
    *,
    name: str,
    message: str,
    payload: dict[str, Any],
    user: Any,
    request: HttpRequest | None,
) -> V:
    if user is not None and not getattr(user, "is_authenticated", False):
        user = None
    for attempt in range(_ATTEMPTS):
        try:
            with transaction.atomic():
                _lock_name(model, name)
                latest = model.objects.filter(name=name).aggregate(top=Max("version"))["top"]
                obj = model.objects.create(
                    name=name,
                    version=(latest or 0) + 1,
                    message=message,
                    author=user,
                    **payload,
                )
                record(
                    action=Action.CREATE,
                    obj=obj,
                    user=user,
                    request=request,
                    message=message,
                    after={"name": name, "version": obj.version, "message": message, **payload},
                )
                transaction.on_commit(tasks.schedule_mirror)
                return obj  # type: ignore[no-any-return]
        except IntegrityError:
            if attempt == _ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def create_tier_config(
    *,
    name: str,
    config: Any,
    message: str = "",
    user: Any = None,
    request: HttpRequest | None = None,
) -> TierConfigVersion:
    """Validate with scheduler.parse_config (raises scheduler.ConfigError) and store the next
    version of `name`. Stored as given (config_to_dict keeps only the fields that were set)."""
    document = config_to_dict(parse_config(config))
    return _create_version(
        TierConfigVersion,
        name=name,
        message=message,
        payload={"config": document},
        user=user,
        request=request,
    )


def create_launch_profile(
    *,
    name: str,
    args: Any,
    message: str = "",
    user: Any = None,
    request: HttpRequest | None = None,
) -> LaunchProfileVersion:
    """Validate with vllm_args.validate_args (raises vllm_args.ArgsError) and store the next
    version of `name`, holding only the arguments that were set."""
    document = args_to_dict(validate_args(args))
    return _create_version(
        LaunchProfileVersion,
        name=name,
        message=message,
        payload={"args": document},
        user=user,
        request=request,
    )


# Where the engine listens is the node's own (the agent sets it), not the profile's.
NODE_OWN_ARGS = ("host", "port")


def running_args(node: Node) -> dict[str, Any] | None:
    """The launch args of the engine the node's agent reports running, or None when it
    reports none (attached, or never seen)."""
    engine = node.engine or {}
    args = engine.get("args")
    if not isinstance(args, dict) or not args:
        return None
    managed = set(LaunchArgs.model_fields)
    adopted: dict[str, Any] = {}
    extra: list[str] = []
    for key, value in args.items():
        if key in NODE_OWN_ARGS:
            continue
        if key in managed:
            adopted[key] = value
            continue
        # Flags this console does not manage (an engine's own, or a newer vLLM's) travel as
        # they ran, in extra_args.
        flag = "--" + key.replace("_", "-")
        if value is True:
            extra.append(flag)
        elif value is False:
            extra.append("--no-" + key.replace("_", "-"))
        else:
            extra.append(f"{flag}={value}")
    if extra:
        adopted["extra_args"] = [*adopted.get("extra_args", []), *extra]
    if "model" not in adopted and engine.get("model"):
        adopted["model"] = engine["model"]
    return adopted


def adopt_running_flags(
    node: Node, name: str, *, user: Any = None, request: HttpRequest | None = None
) -> LaunchProfileVersion:
    """Save the node's running engine flags as the next version of launch profile `name` and
    make the node want it. The agent sees it already runs that command line and takes it as
    applied without a restart, so the node starts with a profile and no drift."""
    args = running_args(node)
    if args is None:
        raise ValueError("node: its agent reports no running engine flags (attached or unseen)")
    with transaction.atomic():
        version = create_launch_profile(
            name=name,
            args=args,
            message=f"adopted from {node.name}'s running engine",
            user=user,
            request=request,
        )
        set_desired(
            [node],
            launch_profile=version,
            user=user,
            reason="running flags adopted",
            request=request,
        )
    return version
