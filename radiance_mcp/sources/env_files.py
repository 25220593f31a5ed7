"""Env files on this machine: a service's planned pair and shape as render_gates wrote it (the text only is
read here; core/gates.py parses it)."""

from __future__ import annotations

from pathlib import Path

from radiance_mcp.core.errors import InputError
from radiance_mcp.core.gates import read_env_plan
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


async def planned_pair(runtime: Runtime, service: str) -> int | None:
    """The pair a service's env file plans (weights + pool), or None where it has no env file readable here."""
    entry = runtime.fleet.services[service]
    if entry.env_file is None or entry.host is not None:
        return None
    try:
        text = await read_env_file(Path(entry.env_file).expanduser())
        planned = read_env_plan(text)
    except (InputError, OSError):
        return None
    return planned.weights_mib + planned.pool_mib
