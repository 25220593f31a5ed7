"""Env files on this machine: a service's planned pair and shape as render_gates wrote it (the text only is
read here; core/gates.py parses it)."""

from __future__ import annotations

from pathlib import Path

from radiance_mcp.core.errors import InputError, RadianceMCPError
from radiance_mcp.core.gates import EnvPlan, read_env_plan
from radiance_mcp.models.gates import MAX_ENV_BYTES
from radiance_mcp.sources.offload import to_thread
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.sources.scripts import read_small


async def read_env_file(path: Path) -> str:
    """An env file's text, read as the serve-script check reads one (scripts.read_small: a regular file only, a
    FIFO or device refused, never waited on), and refused past MAX_ENV_BYTES (InputError: not an env file)."""
    text = await to_thread(read_small, path, "env_file")
    if len(text.encode()) > MAX_ENV_BYTES:
        raise InputError(f"env_file {path}: over {MAX_ENV_BYTES:,} bytes, not an env file")
    return text


EnvRead = tuple[str, EnvPlan] | str | None
"""A service's env file and what it plans; a string: why it could not be read; None: it has none here."""


async def service_env(runtime: Runtime, service: str) -> EnvRead:
    """A service's env file (its path as the config names it) and the pair and shape it plans; why it could not be
    read (missing, not a regular file, not one render_gates reads); or None where the config names none here (none,
    or one on another host)."""
    entry = runtime.fleet.services[service]
    if entry.env_file is None or entry.host is not None:
        return None
    try:
        return entry.env_file, read_env_plan(await read_env_file(Path(entry.env_file).expanduser()))
    except RadianceMCPError as exc:
        return f"{service}'s env_file cannot be read ({exc})"
