"""The models an endpoint serves, kept as they are found, so that the playground and benchmarks
can offer them without an operator pressing "Fetch models" first.

    sync_gateway_models(node, previous="") -> Endpoint | None
        the model the node's engine reports (heartbeats) into its gateway endpoint
    keep_found_models(endpoint, ids, user, request=None) -> Endpoint
        what the connection doctor found at the endpoint's /models
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from console.fleet.choices import EndpointKind
from console.fleet.models import Endpoint, Node
from console.fleet.services import update_endpoint


def sync_gateway_models(node: Node, previous: str = "") -> Endpoint | None:
    """The model the node's engine reports serving becomes the first of its gateway endpoint's
    models, and its default where the endpoint had none or named `previous` (the engine's model
    before). Other models an operator fetched stay listed; `previous` goes. Audited as the
    system's change."""
    model = str((node.engine or {}).get("model") or "")
    endpoint = Endpoint.objects.filter(node=node, kind=EndpointKind.GATEWAY).first()
    if endpoint is None or not model:
        return endpoint
    listed = [str(m) for m in endpoint.models or []]
    models = [model, *(m for m in listed if m not in (model, previous))]
    default = endpoint.default_model
    if not default or default == previous or default not in models:
        default = model
    if models == listed and default == endpoint.default_model:
        return endpoint
    return update_endpoint(endpoint, None, models=models, default_model=default)


def keep_found_models(
    endpoint: Endpoint, model_ids: list[str], user: Any, request: HttpRequest | None = None
) -> Endpoint:
    """Keep the model IDs a connection test found: the list is replaced when it differs; the
    default model is kept (the doctor reports a default it did not find, for the operator to
    fix), or set to the first one when there was none."""
    if not model_ids or ([str(m) for m in endpoint.models or []] == model_ids):
        return endpoint
    default = endpoint.default_model or model_ids[0]
    return update_endpoint(endpoint, user, request, models=model_ids, default_model=default)
