"""Where a shape flag's value comes from: a constant, an env-file variable, or nothing known,
followed through the script's assignments; and which env variable owns each flag."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from radiance_mcp.core.audit.serve_script.lexer import CONSTANT, NAME
from radiance_mcp.core.audit.serve_script.parser import Assignment, Scope


def _reference_name(value: str) -> tuple[str | None, str | None]:
    """'$X' / '${X}' / '${X:?msg}' -> ('X', None); '${X:-8}' -> ('X', '8'); anything else -> (None, None)."""
    match = re.fullmatch(rf"\$(?:(?P<plain>{NAME})|\{{(?P<braced>{NAME})(?P<rest>[^}}]*)\}})", value)
    if not match:
        return None, None
    name = match["plain"] or match["braced"]
    rest = match["rest"] or ""
    default = re.fullmatch(r":?[-=](?P<default>.*)", rest)
    return name, default["default"] if default else None


ReachKind = Literal["env", "literal", "default", "override", "computed", "unset"]


@dataclass(frozen=True)
class Reach:
    """Where one shape flag's value comes from, at one place of the script."""

    kind: ReachKind
    line: int
    scope: Scope
    name: str | None
    value: str


class Tracer:
    """Follows flag values through the script's assignments, each variable once (cached), to a bounded depth."""

    MAX_DEPTH = 32

    def __init__(self, assignments: list[Assignment], env: set[str]) -> None:
        self.by_name: dict[str, list[Assignment]] = {}
        for assignment in assignments:
            self.by_name.setdefault(assignment.name, []).append(assignment)
        self.env = env
        self.cache: dict[str, tuple[bool, list[Reach]]] = {}

    def trace(self, value: str, line: int, scope: Scope, depth: int = 0) -> list[Reach]:
        """Where a value at (line, scope) comes from: constants, env-file variables, or nothing known."""
        if CONSTANT.match(value):
            return [Reach("literal", line, scope, None, value)]
        name, default = _reference_name(value)
        if name is None:
            return [Reach("computed", line, scope, None, value)]
        reaches = []
        if default is not None and CONSTANT.match(default):
            reaches.append(Reach("default", line, scope, name, default))
        assigned, through = self._assigned(name, depth)
        reaches += through
        if name in self.env:
            reaches.append(Reach("env", line, scope, name, value))
        elif not assigned:
            reaches.append(Reach("unset", line, scope, name, value))
        return reaches

    def _assigned(self, name: str, depth: int) -> tuple[bool, list[Reach]]:
        """Whether the script assigns name, and what its assignments reach."""
        if name in self.cache:
            return self.cache[name]
        if depth >= self.MAX_DEPTH:
            return True, []  # too deep to follow: nothing is claimed about it
        self.cache[name] = (True, [])  # a variable defined through itself adds nothing more
        assigned, reaches = False, []
        for a in self.by_name.get(name, []):
            ref, fallback = _reference_name(a.value)
            if ref == name:  # X=${X:-8}: only its fallback counts
                if fallback is not None and CONSTANT.match(fallback):
                    reaches.append(Reach("default", a.line, a.scope, name, fallback))
                continue
            assigned = True
            if name in self.env:
                reaches.append(Reach("override", a.line, a.scope, name, a.value))
            elif CONSTANT.match(a.value):
                reaches.append(Reach("literal", a.line, a.scope, name, a.value))
            else:
                reaches += self.trace(a.value, a.line, a.scope, depth + 1)
        self.cache[name] = (assigned, reaches)
        return assigned, reaches


def owner_of(reaches: list[Reach], order: dict[str, int]) -> str:
    """The env variable that owns a flag: the one the shared part passes, else the most used, else the first defined."""
    def rank(name: str) -> tuple[bool, int, int]:
        mine = [r for r in reaches if r.name == name]
        return (not any(r.scope.kind == "top level" for r in mine), -len(mine), order[name])

    return min({r.name for r in reaches if r.name is not None}, key=rank)
