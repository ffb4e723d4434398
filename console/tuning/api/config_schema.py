"""The tier config document in the API's OpenAPI schema: the scheduler's own JSON schema
(`TierConfig.model_json_schema()`, with every field's `description` from scheduler/config.py),
turned into OpenAPI 3.0, so that a client reads the same help as the console's form editor and
docs/admission.md's reference table, from the one schema the scheduler validates with.

OpenAPI 3.0 is not JSON Schema 2020-12, which pydantic writes: `{"type": "null"}` becomes
`nullable`, a numeric `exclusiveMinimum` becomes `minimum` + `exclusiveMinimum: true`, and the
`$defs` are inlined (the document has no recursion), and pydantic's strict `int | float` is a
number.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scheduler import TierConfig

# pydantic's names for a bound it could not place on a JSON Schema keyword (on an
# `int | float` union): the OpenAPI keyword and whether it is exclusive.
_LOOSE_BOUNDS = {
    "gt": ("minimum", True),
    "ge": ("minimum", False),
    "lt": ("maximum", True),
    "le": ("maximum", False),
}


def _bounds(node: dict[str, Any]) -> dict[str, Any]:
    out = dict(node)
    for key, (keyword, exclusive) in _LOOSE_BOUNDS.items():
        if key in out:
            out[keyword] = out.pop(key)
            if exclusive:
                out[f"exclusive{keyword[0].upper()}{keyword[1:]}"] = True
    for keyword in ("exclusiveMinimum", "exclusiveMaximum"):
        value = out.get(keyword)
        if not isinstance(value, bool) and isinstance(value, int | float):
            out["minimum" if keyword == "exclusiveMinimum" else "maximum"] = value
            out[keyword] = True
    return out


def openapi_schema(node: Any, defs: dict[str, Any] | None = None) -> Any:
    """`node` (a pydantic JSON schema, or part of one) as an OpenAPI 3.0 schema object."""
    if isinstance(node, list):
        return [openapi_schema(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if defs is None:
        defs = node.get("$defs", {})
    ref = node.get("$ref")
    if isinstance(ref, str):
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return openapi_schema({**defs[ref.rsplit("/", 1)[-1]], **rest}, defs)
    out = {k: openapi_schema(v, defs) for k, v in node.items() if k not in ("$defs", "title")}
    branches = out.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        kept = [b for b in branches if b != {"type": "null"}]
        del out["anyOf"]
        if len(kept) == 1:
            out = {**kept[0], **out}
        else:
            out["anyOf"] = kept
        out["nullable"] = True
    if out.get("anyOf") == [{"type": "integer"}, {"type": "number"}]:
        del out["anyOf"]  # pydantic's strict `int | float`: to a client, a number
        out["type"] = "number"
    return _bounds(out)


def tier_config_openapi() -> dict[str, Any]:
    schema: dict[str, Any] = openapi_schema(TierConfig.model_json_schema())
    schema["description"] = (
        'A tier config, {"scheduler": {...}}: the fields are described here and in '
        "docs/admission.md's reference table; a removed field is refused naming it."
    )
    return schema


@extend_schema_field(tier_config_openapi(), component_name="TierConfigDocument")
class TierConfigDocumentField(serializers.JSONField):
    """A JSON field whose OpenAPI schema is the tier config's (validated by the serializer)."""
