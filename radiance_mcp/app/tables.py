"""A tool's answer for people: aligned 'key  value' lines, lists of records as tables (the CLI without --json)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from radiance_mcp.models.base import LineRef


def render(model: BaseModel) -> str:
    """A tool output as aligned 'key  value' lines, lists of records as tables."""
    lines: list[str] = []
    scalars = []
    for name, value in model:
        if isinstance(value, BaseModel):
            lines.append(f"\n{name}:")
            lines.extend("  " + line for line in render(value).splitlines())
        elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
            lines.append(f"\n{name}:")
            lines.extend("  " + line for line in _table(value))
        elif isinstance(value, dict) and value:
            lines.append(f"\n{name}:")
            width = max(len(str(k)) for k in value)
            for key, item in value.items():
                shown = f"line {item.line}: {item.text}" if isinstance(item, LineRef) else _cell(item)
                lines.append(f"  {str(key):<{width}}  {shown}")
        elif isinstance(value, list):
            if value:
                lines.append(f"\n{name}:")
                lines.extend(f"  - {_cell(item)}" for item in value)
        else:
            scalars.append((name, _cell(value)))
    width = max((len(n) for n, _ in scalars), default=0)
    head = [f"{n:<{width}}  {v}" for n, v in scalars]
    return "\n".join(head + lines).strip("\n")


def _table(rows: list[BaseModel]) -> list[str]:
    columns = [name for name, value in rows[0] if not isinstance(value, list | dict)]
    cells = [[_cell(getattr(row, c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    out = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, BaseModel):
        data = value.model_dump()
        if "unit" in data and "lines" in data:  # a figure: as printed (or its value and unit), and its lines
            lines = ", ".join(str(ref["line"]) for ref in data["lines"])
            return f"{data['printed'] or format(data['value'], ',.2f') + ' ' + data['unit']} (line {lines})"
        if "line" in data and "text" in data:
            return f"line {data['line']}"
        return json.dumps(data)
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)
