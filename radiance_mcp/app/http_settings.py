"""The settings of `serve --http` that come from its flags and environment, checked before the server is built:
the bearer token (--token, --token-file or RADIANCE_MCP_TOKEN) and the limits http_guard keeps.

Security: `ps` shows every user of the machine a process's arguments, so a token given with --token is
readable by all of them; a file only its owner may read (chmod 600), or the environment, is not.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from radiance_mcp.core.errors import InputError

if TYPE_CHECKING:  # uvicorn loads when the server runs
    from radiance_mcp.app.http_guard import HttpLimits

TOKEN_ENV = "RADIANCE_MCP_TOKEN"
MAX_TOKEN_FILE_BYTES = 4096
"""A --token-file holds one token on one line; a longer file is some other file."""
HEAD_TIMEOUT_S = 10.0
"""The most seconds a request head may take to arrive (a client sends it at once)."""
MAX_CONNECTIONS = 256
"""The connections held at once, in all (far above what a few agents open)."""
MAX_CONNECTIONS_PER_CLIENT = 32
"""The connections one client address may hold at once (an agent opens a few)."""


def limits(head_timeout_s: float, max_connections: int, max_connections_per_client: int) -> HttpLimits:
    """The HTTP limits of the flags, the process's open-file limit raised to fit them."""
    from radiance_mcp.app.http_guard import HttpLimits, open_files_for

    if max_connections_per_client > max_connections:
        raise InputError(
            f"--max-connections-per-client {max_connections_per_client} is above --max-connections "
            f"{max_connections}: one address can hold no more than all; raise --max-connections too"
        )
    held = HttpLimits(head_timeout_s, max_connections, max_connections_per_client)
    open_files_for(held)
    return held


def token(flag: str | None, file: Path | None) -> str | None:
    """The bearer token: --token or --token-file (not both), else $RADIANCE_MCP_TOKEN if set and not empty."""
    if flag is not None and file is not None:
        raise InputError("give --token or --token-file, not both")
    if file is not None:
        return _checked(_read_token_file(file), f"--token-file {file}")
    if flag is not None:
        return _checked(flag, "--token")
    from_env = os.environ.get(TOKEN_ENV)
    return _checked(from_env, TOKEN_ENV) if from_env else None


def _read_token_file(path: Path) -> str:
    """The file's text, its trailing line ending dropped; a warning if others may read it."""
    where = f"--token-file {path}"
    try:
        with path.open("rb") as file:
            data = file.read(MAX_TOKEN_FILE_BYTES + 1)
            mode = os.fstat(file.fileno()).st_mode
    except OSError as exc:
        raise InputError(f"{where}: {exc.strerror}; name a readable file that holds the token") from None
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise InputError(f"{where}: longer than {MAX_TOKEN_FILE_BYTES} bytes, so not a token file; "
                         "name the file that holds the token alone, on one line")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: not UTF-8 text; write the token as text, on one line") from None
    if stat.S_ISREG(mode) and mode & (stat.S_IRGRP | stat.S_IROTH):
        print(f"radiance-mcp: warning: {where} may be read by other users (mode {stat.S_IMODE(mode):04o}): "
              f"chmod 600 {path}", file=sys.stderr)
    return text.removesuffix("\n").removesuffix("\r")


def _checked(value: str, where: str) -> str:
    """A token clients can send: not empty, one line, no space at either end (a header's value loses it)."""
    if not value:
        raise InputError(f"{where} is empty: give the token, or none of --token, --token-file and {TOKEN_ENV} "
                         "(a loopback bind then serves without one)")
    if not value.isprintable() or value != value.strip():
        raise InputError(f"{where}: the token holds a line break, a control character or a space at an end; "
                         "write it on one line, with no space around it")
    return value
