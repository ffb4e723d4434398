"""Creating versions: validate, number, store and audit in one transaction.

Views, the API, the demo seeder, sweeps and adoptions all create versions through here, so the
rules (validation by the one schema, the next number per name, an audit row) hold everywhere.
A launch profile is also checked against the engines that may run it (`check_launch_args`):
the form, the API, the sweeps and "save running flags" all get vLLM's own refusal, in its
words (docs/architecture.md#agent-and-console-protocol, "Engine report").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.http import HttpRequest

from console.audit.choices import Action
from console.audit.services import record
from console.fleet.choices import NodeMode
from console.fleet.models import Node
from console.fleet.services import set_desired
from console.tuning import tasks
from console.tuning.diffs import launch_args_diff
from console.tuning.engine_check import check_on_nodes
from console.tuning.models import LaunchProfileVersion, TierConfigVersion, VersionedDocument
from console.tuning.vllm_args import ArgsError, LaunchArgs, args_to_dict, validate_args
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
    parent: VersionedDocument | None = None,
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
                    parent=parent,
                    **payload,
                )
                after = {"name": name, "version": obj.version, "message": message, **payload}
                if parent is not None:
                    after["parent"] = parent.pk
                record(
                    action=Action.CREATE,
                    obj=obj,
                    user=user,
                    request=request,
                    message=message,
                    after=after,
                )
                transaction.on_commit(tasks.schedule_mirror)
                return obj  # type: ignore[no-any-return]
        except IntegrityError:
            if attempt == _ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _parent_of(model: type[Any], parent: Any) -> Any:
    """The version a new one was made from (its diff is shown against it), or None."""
    if parent is None or isinstance(parent, model):
        return parent
    raise TypeError(f"parent must be a {model.__name__}, not {type(parent).__name__}")


def create_tier_config(
    *,
    name: str,
    config: Any,
    message: str = "",
    user: Any = None,
    request: HttpRequest | None = None,
    parent: TierConfigVersion | None = None,
) -> TierConfigVersion:
    """Validate with scheduler.parse_config (raises scheduler.ConfigError) and store the next
    version of `name`. Stored as given (config_to_dict keeps only the fields that were set).
    `parent`: the version this one was made from, which its page diffs against."""
    document = config_to_dict(parse_config(config))
    return _create_version(
        TierConfigVersion,
        name=name,
        message=message,
        payload={"config": document},
        user=user,
        request=request,
        parent=_parent_of(TierConfigVersion, parent),
    )


def engine_nodes() -> list[Node]:
    """The nodes whose engines a launch profile may end up on: every managed node."""
    return list(Node.objects.filter(mode=NodeMode.MANAGED).order_by("name"))


def check_launch_args(args: Any, nodes: list[Node] | None = None) -> dict[str, Any]:
    """The one validation of a launch profile, whatever writes it: vllm_args' rules, then the
    argument parser of every engine that reported one (engine_check.py), so a profile no
    engine accepts is refused before it is stored, in vLLM's words ("unrecognized arguments:
    --bogus-flag 3"). `nodes`: those to check against (default: every managed node). Returns
    the document as stored; raises ArgsError listing every broken rule."""
    parsed = validate_args(args)
    check = check_on_nodes(parsed, engine_nodes() if nodes is None else nodes)
    if check.errors:
        raise ArgsError(check.errors)
    return args_to_dict(parsed)


def create_launch_profile(
    *,
    name: str,
    args: Any,
    message: str = "",
    user: Any = None,
    request: HttpRequest | None = None,
    parent: LaunchProfileVersion | None = None,
    engines: list[Node] | None = None,
) -> LaunchProfileVersion:
    """Validate with `check_launch_args` (raises vllm_args.ArgsError) and store the next
    version of `name`, holding only the arguments that were set. `engines`: the nodes whose
    engines it is checked against when the caller knows where it will run (a sweep's node);
    default every managed node."""
    document = check_launch_args(args, engines)
    return _create_version(
        LaunchProfileVersion,
        name=name,
        message=message,
        payload={"args": document},
        user=user,
        request=request,
        parent=_parent_of(LaunchProfileVersion, parent),
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


@dataclass(frozen=True)
class Adoption:
    """What "save running flags" did: the version the node now wants, whether it was made
    now, and whether the node's desired profile changed."""

    version: LaunchProfileVersion
    created: bool
    node_changed: bool

    @property
    def summary(self) -> str:
        label = self.version.label
        if self.created:
            return f"Saved {label}"
        if self.node_changed:
            return f"No change: {label} already holds these flags; the node now wants it"
        return f"No change: {label} already holds these flags, and the node wants it"


def adopt_running_flags(
    node: Node, name: str, *, user: Any = None, request: HttpRequest | None = None
) -> Adoption:
    """Save the node's running engine flags as the next version of launch profile `name` and
    make the node want it. The agent sees it already runs that command line and takes it as
    applied without a restart, so the node starts with a profile and no drift. When the
    newest version of `name` already holds exactly these flags, no identical version is made:
    the node is pointed at that one (if it does not want it already)."""
    args = running_args(node)
    if args is None:
        raise ValueError("node: its agent reports no running engine flags (attached or unseen)")
    document = check_launch_args(args)
    with transaction.atomic():
        latest = LaunchProfileVersion.objects.filter(name=name).order_by("-version").first()
        if latest is not None and not launch_args_diff(latest.args, document):
            changed = set_desired(
                [node],
                launch_profile=latest,
                user=user,
                reason="running flags adopted (no change)",
                request=request,
            )
            return Adoption(latest, created=False, node_changed=bool(changed))
        desired = node.desired_launch_profile
        version = create_launch_profile(
            name=name,
            args=document,
            message=f"adopted from {node.name}'s running engine",
            user=user,
            request=request,
            parent=desired if desired is not None and desired.name == name else latest,
        )
        set_desired(
            [node],
            launch_profile=version,
            user=user,
            reason="running flags adopted",
            request=request,
        )
    return Adoption(version, created=True, node_changed=True)
