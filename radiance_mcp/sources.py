"""Where ledger text comes from: inline text or a local file (remote sources plug in here too).

A source turns "which ledger" into a parsed ``Boot``; the parser never knows where the text
came from. Every source has a ``label`` used in every figure's provenance and every error.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from radiance_mcp.errors import InputError, SourceError
from radiance_mcp.ledger import Boot, read_file, read_text


class LedgerSource(Protocol):
    @property
    def label(self) -> str:
        """Where the text comes from, as every figure's provenance and every error names it."""
        ...

    async def read(self, boot: int = -1) -> Boot:
        """Parse one boot of the ledger: -1 the newest (default), 1 the oldest."""
        ...


@dataclass(frozen=True)
class InlineSource:
    text: str
    label: str = "log_text"

    async def read(self, boot: int = -1) -> Boot:
        return read_text(self.text, source=self.label, boot=boot)


@dataclass(frozen=True)
class LocalFileSource:
    path: Path

    @property
    def label(self) -> str:
        return str(self.path)

    async def read(self, boot: int = -1) -> Boot:
        try:
            # The reader streams the file in chunks; a thread keeps the event loop free meanwhile.
            return await asyncio.to_thread(read_file, self.path, source=self.label, boot=boot)
        except FileNotFoundError:
            raise SourceError(f"{self.label}: no such file; check the path or the service's log setting") from None
        except IsADirectoryError:
            raise SourceError(f"{self.label}: is a directory; name the log file inside it") from None
        except PermissionError:
            raise SourceError(f"{self.label}: permission denied; the server's user cannot read it") from None
        except OSError as exc:
            raise SourceError(f"{self.label}: cannot be read: {exc.strerror or exc}") from exc


def allowed_local_path(raw: str, roots: list[Path]) -> Path:
    """The resolved path, if it lies under one of the roots; else an InputError naming them.

    Security: an agent could ask for '/etc/shadow' or 'roots/../../etc/shadow', or plant a
    symlink inside a root that points out of it. The path is resolved ('..' and every
    symlink) before it is compared, so only files really under a root are read.
    """
    if not raw or "\x00" in raw:
        raise InputError(f"log={raw!r}: a path must be non-empty and hold no NUL byte")
    path = Path(os.path.expanduser(raw))
    if not path.is_absolute():
        raise InputError(f"log={raw!r}: give an absolute path (relative paths depend on the server's directory)")
    resolved = path.resolve()
    if any(resolved.is_relative_to(root) for root in roots):
        return resolved
    listed = ", ".join(str(r) for r in roots)
    raise InputError(
        f"log={raw!r} resolves to {resolved}, outside the allowed log roots ({listed}); "
        "add its directory to [server] log_roots in the fleet config, or name a service instead"
    )
