"""Env files on this machine: a service's planned pair and shape as render_gates wrote it (the text only is
read here; core/gates.py parses it)."""

from __future__ import annotations

from pathlib import Path

from radiance_mcp.core.errors import InputError
from radiance_mcp.core.gates import EnvPlan, read_env_plan
from radiance_mcp.models.gates import MAX_ENV_BYTES
from radiance_mcp.sources.offload import to_thread
from radiance_mcp.sources.runtime import Runtime


async def read_env_file(path: Path) -> str:
    """An env file's text (InputError past MAX_ENV_BYTES: not an env file; OSError: unreadable)."""

    def read() -> str:
        with path.open("rb") as handle:
            data = handle.read(MAX_ENV_BYTES + 1)
        if len(data) > MAX_ENV_BYTES:
            raise InputError(f"env_file {path}: over {MAX_ENV_BYTES:,} bytes, not an env file")
        return data.decode("utf-8", errors="replace")

    return await to_thread(read)


async def service_env(runtime: Runtime, service: str) -> tuple[str, EnvPlan] | None:
    """A service's env file (its path as the config names it) and the pair and shape it plans, or None where it
    has no env file readable here (none in the config, on another host, missing, or not one render_gates reads)."""
    entry = runtime.fleet.services[service]
    if entry.env_file is None or entry.host is not None:
        return None
    try:
        return entry.env_file, read_env_plan(await read_env_file(Path(entry.env_file).expanduser()))
    except (InputError, OSError):
        return None
