"""The JSON schemas an agent reads in tools/list, compacted: every token of them is paid on every turn.

Pure: a schema in, a smaller schema out, accepting exactly the same values an agent may send
(``compact``) or describing the same structured output at its top level (``shallow``).

- ``compact`` (input schemas, and output schemas' shared parts): drops the ``title`` pydantic
  writes for every property and model (the property's name already says it) and the
  ``"default": null`` of an optional argument (absent and null mean the same to the server), and
  in an input schema a default of false or [] (an omitted flag is off, an omitted list empty)
  and each nested record written in place rather than under ``$defs``,
  writes a nullable ``anyOf`` as a type list, and names the bounds pydantic leaves as ``ge`` /
  ``le`` on a nullable field with JSON Schema's words (``minimum`` / ``maximum``). In an input
  schema an optional argument is published with its own type alone: leaving it out says
  "none" (the server also reads an explicit null so).
  Everything that constrains a value stays: types, enums, bounds, maxLength, required,
  additionalProperties.
- ``shallow`` (output schemas): the top level of a tool's structured output, each property by
  its name (and its enum, where its values are a few words), no types and no ``required`` list
  (an agent reads the names; the types are paid on every turn for a check the server already
  made). The structured output is a value of the full schema, so it is a value of this one too;
  the full schema of every tool is served as a resource (``schema://<tool>/output``) for a
  client that wants it.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

_NAME_MAPS = ("properties", "$defs", "patternProperties")
"""Keys whose value maps names to schemas: a property named 'title' is not a title."""

_BOUND_KEYWORDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}
"""pydantic writes a Field's bounds under their own names when the field is a union (``int |
None``), where JSON Schema readers ignore them; they are the same bounds in JSON Schema's words."""


def compact(schema: Schema, *, arguments: bool = False) -> Schema:
    """The schema without titles and null defaults; the values it accepts are unchanged.

    arguments: a tool's input schema, where an optional argument (default null) is published
    with its own type alone: leaving it out is how an agent says nothing, and the server reads
    an explicit null the same way. The schema then accepts every value but that null.
    """
    out: Schema = _compact(_inlined(schema) if arguments else schema, arguments)
    return out


def _inlined(schema: Schema) -> Schema:
    """An input schema with each nested model written where it is used, not under $defs and a $ref (the
    arguments nest one level: a list of records, never a model inside itself)."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node and len(node) == 1:
            return walk(defs[node["$ref"].rsplit("/", 1)[-1]])
        return {key: walk(value) for key, value in node.items() if key != "$defs"}

    out: Schema = walk(schema)
    return out


def _compact(node: Any, arguments: bool) -> Any:
    if isinstance(node, list):
        return [_compact(item, arguments) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "default" and (value is None or (arguments and (value is False or value == []))):
            continue
        if key in _NAME_MAPS and isinstance(value, dict):
            out[key] = {name: _compact(sub, arguments) for name, sub in value.items()}
        else:
            out[_BOUND_KEYWORDS.get(key) or key] = _compact(value, arguments)
    optional = arguments and "default" in node and node["default"] is None
    return _nullable_as_type_list(out, drop_null=optional)


def _nullable_as_type_list(node: dict[str, Any], *, drop_null: bool = False) -> dict[str, Any]:
    """{"anyOf": [{"type": T, ...}, {"type": "null"}]} -> {"type": [T, "null"], ...}: the same values
    (drop_null: {"type": T, ...}, for an optional argument).

    Only where the other arm is a plain typed schema whose keywords (bounds, maxLength, enum)
    apply to T alone and would let null through anyway; an enum gains null, as the anyOf did.
    """
    arms = node.get("anyOf")
    if not isinstance(arms, list) or len(arms) != 2 or {"type": "null"} not in arms:
        return node
    (arm,) = [a for a in arms if a != {"type": "null"}]
    if not isinstance(arm.get("type"), str) or set(arm) & {"anyOf", "oneOf", "allOf", "$ref", "const", "not"}:
        return node
    merged = {k: v for k, v in node.items() if k != "anyOf"}
    merged.update(arm)
    if drop_null:
        return merged
    merged["type"] = [arm["type"], "null"]
    if "enum" in arm:
        merged["enum"] = [*arm["enum"], None]
    return merged


def shallow(schema: Schema) -> Schema:
    """The top level of an object schema: each property's name, with its enum where it has one; the
    types and the nesting are the full schema's (a resource)."""
    defs = schema.get("$defs", {})
    properties = {name: _shallow_property(sub, defs) for name, sub in schema.get("properties", {}).items()}
    return {"type": "object", "properties": properties}


def _shallow_property(node: Schema, defs: Schema) -> Schema:
    enum: list[Any] | None = None
    nullable = False
    for arm in node.get("anyOf", [node]):
        arm = defs.get(arm["$ref"].rsplit("/", 1)[-1], {}) if "$ref" in arm else arm
        if arm.get("type") == "null":
            nullable = True
        elif "enum" in arm and arm.get("type") == "string":
            enum = [*(enum or []), *arm["enum"]]
        else:
            return {}  # a number, a record, a list: its type is the full schema's
    return {} if enum is None else {"enum": [*enum, *([None] if nullable else [])]}
