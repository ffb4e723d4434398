"""OpenAPI for the heartbeat's pydantic models (schemas.WireModel).

drf-spectacular's pydantic support passes pydantic's JSON Schema through, which is
OpenAPI 3.1 flavoured (`{"type": "null"}` in anyOf, `const`, numeric exclusive bounds); our schema
is OpenAPI 3.0, so
rewrite those into `nullable`, `enum` and boolean exclusive bounds."""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.contrib.pydantic import PydanticExtension
from drf_spectacular.plumbing import ResolvedComponent
from pydantic.json_schema import model_json_schema


def to_oas30(node: Any) -> Any:
    if isinstance(node, list):
        return [to_oas30(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: to_oas30(value) for key, value in node.items()}
    for bound, plain in (("exclusiveMaximum", "maximum"), ("exclusiveMinimum", "minimum")):
        if isinstance(node.get(bound), int | float) and not isinstance(node.get(bound), bool):
            node[plain], node[bound] = node[bound], True
    if "const" in node:
        node["enum"] = [node.pop("const")]
    options = node.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [o for o in options if o != {"type": "null"}]
        del node["anyOf"]
        if len(rest) == 1 and "$ref" not in rest[0]:
            node.update(rest[0])
        elif len(rest) == 1:
            node["allOf"] = rest
        else:
            node["anyOf"] = rest
        node["nullable"] = True
    return node


class WireModelExtension(PydanticExtension):
    target_class = "console.fleet.schemas.WireModel"
    match_subclasses = True
    priority = 1

    def map_serializer(self, auto_schema: Any, direction: str) -> Any:
        mode: Literal["validation", "serialization"] = (
            "validation" if direction == "request" else "serialization"
        )
        schema = model_json_schema(
            self.target, ref_template="#/components/schemas/{model}", mode=mode
        )
        for sub_name, sub_schema in schema.pop("$defs", {}).items():
            component = ResolvedComponent(
                name=sub_name,
                type=ResolvedComponent.SCHEMA,
                object=sub_name,
                schema=to_oas30(sub_schema),
            )
            auto_schema.registry.register_on_missing(component)
        return to_oas30(schema)
