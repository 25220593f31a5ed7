"""The procedures as skills: each ``skills/<name>/SKILL.md`` read, checked and rendered for a service.

A SKILL.md opens with Agent Skills front matter (``name``, ``description``) between ``---``
lines; its body is the procedure. The tools it names are its backticked tool names, in the
order they first appear: that order goes into the server's instructions. The server serves
each skill as a prompt (the procedure for a service) and as a resource (``skill://<name>``).

The one home of the skills is ``skills/`` at the top of the repository; ``radiance_mcp/_skills``
links to it, so the package data of a wheel carries the same files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field

from radiance_mcp.core.errors import ConfigError
from radiance_mcp.sources.config import Fleet

SKILLS_DIR = Path(__file__).parents[1] / "_skills"
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
"""The Agent Skills limits on name and description."""
_BACKTICKED = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`")


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    title: str
    body: str
    """The procedure: the file after its front matter."""
    text: str
    """The whole file."""
    tools: tuple[str, ...]
    """The tools it names, in the order they first appear."""

    @property
    def uri(self) -> str:
        return f"skill://{self.name}"


def parse(text: str, folder: str, tool_names: Iterable[str]) -> Skill:
    """One SKILL.md; folder is its directory's name, which must be the skill's name."""
    where = f"skills/{folder}/SKILL.md"
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    if match is None:
        raise ConfigError(f"{where}: does not open with front matter between '---' lines")
    fields: dict[str, str] = {}
    for number, line in enumerate(match.group(1).splitlines(), start=2):
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise ConfigError(f"{where}:{number}: {line!r} is not 'key: value'")
        fields[key.strip()] = value.strip().strip("\"'")
    name, description = fields.get("name", ""), fields.get("description", "")
    if not NAME.match(name) or len(name) > MAX_NAME_CHARS or name != folder:
        raise ConfigError(
            f"{where}: name {name!r} must be lowercase words joined by '-', at most {MAX_NAME_CHARS} characters, "
            "and the folder's name"
        )
    if not description or len(description) > MAX_DESCRIPTION_CHARS:
        raise ConfigError(f"{where}: description must be 1 to {MAX_DESCRIPTION_CHARS} characters")
    body = text[match.end():].lstrip("\n")
    heading = re.search(r"^# (.+)$", body, re.M)
    known = set(tool_names)
    tools = tuple(dict.fromkeys(n for n in _BACKTICKED.findall(body) if n in known))
    return Skill(name, description, heading.group(1).strip() if heading else name, body, text, tools)


def load(tool_names: Iterable[str], directory: Path = SKILLS_DIR) -> list[Skill]:
    """Every skills/<name>/SKILL.md, by name."""
    names = list(tool_names)
    return [
        parse(path.read_text(encoding="utf-8"), path.parent.name, names)
        for path in sorted(directory.glob("*/SKILL.md"))
    ]


def instructions(skills: Iterable[Skill]) -> str:
    """The procedures and the order of their tools, for the server's instructions ("" without any)."""
    lines = [f"- {s.name}: {s.title}. Tools in order: {' -> '.join(s.tools)}." for s in skills]
    if not lines:
        return ""
    return "\n".join(["The procedures, each a prompt and a skill:// resource of this server:", *lines]) + "\n"


def describe_service(fleet: Fleet, service: str) -> str:
    """What the config knows of a service, as a sentence (ConfigError naming list_fleet if unknown)."""
    entry = fleet.service(service)
    parts = [f"on host {entry.host}" if entry.host else "on this machine"]
    if entry.log:
        parts.append(f"boot ledger in the log file {entry.log}")
    elif entry.container:
        parts.append(f"boot ledger in the podman logs of container {entry.container}")
    else:
        parts.append("no ledger source configured (pass log or log_text to the ledger tools)")
    parts.append(f"endpoint {entry.endpoint}" if entry.endpoint else "no endpoint configured (the probes cannot run)")
    if entry.serve_script:
        parts.append(f"serve script {entry.serve_script}")
    if entry.env_file:
        parts.append(f"env file {entry.env_file}")
    return f"Service `{service}`: " + "; ".join(parts) + "."


def prompt_function(skill: Skill, fleet: Fleet) -> Callable[..., str]:
    """The prompt's function: the procedure, opened by the service it is for."""

    def render(
        service: Annotated[str | None, Field(description="The service to work on (list_fleet names them).")] = None,
    ) -> str:
        if service is None:
            head = "First call `list_fleet` and pick the service; pass its name as `service` to each tool."
        else:
            head = f"{describe_service(fleet, service)} Pass service=\"{service}\" to each tool."
        return f"{head}\n\n{skill.body}"

    return render
