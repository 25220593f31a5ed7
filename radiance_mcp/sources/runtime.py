"""The Runtime: what every tool call shares, the fleet and the SSH connections.

Made once by the server or the CLI and passed to every tool; sources/ledgers.py and sources/scripts.py read
through it (the fleet's hosts and paths, the SSH pool), the tools never hold connections.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from radiance_mcp.sources.config import Fleet

if TYPE_CHECKING:  # remote (and asyncssh with it) is imported on first remote read
    from radiance_mcp.sources.remote import SSHPool


@dataclass
class Runtime:
    fleet: Fleet
    trust_local_paths: bool = False
    """True for the CLI: a person naming a file on their own machine needs no log root."""
    ssh_pool: SSHPool | None = None
    """The SSH connection pool every call shares, made on first remote read (or given, in tests)."""

    def pool(self) -> SSHPool:
        """The SSH pool, made on first use; its connections close when idle."""
        if self.ssh_pool is None:
            from radiance_mcp.sources.remote import SSHPool

            self.ssh_pool = SSHPool()
        return self.ssh_pool

    async def close(self) -> None:
        """Close the SSH connections: the end of a CLI command, or the server's shutdown."""
        if self.ssh_pool is not None:
            await self.ssh_pool.close()
