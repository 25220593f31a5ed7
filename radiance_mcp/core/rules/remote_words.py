"""Argument rules: every word that enters a command sent to a host is checked here, then quoted.

Each rule stops a way of turning a read or a dry run into something else (a second command,
an option, a path out of the log roots). The checks are made before anything is sent; the
host checks paths again after resolving symlinks (programs/common.sh), which only it can see.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence

from radiance_mcp.core.constants import CONTROL, MAX_BOOT, MAX_PATH_CHARS
from radiance_mcp.core.errors import InputError

CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""podman's own rule for names (and IDs are hex): nothing a shell or podman's flags could read."""


def check_container(name: str) -> str:
    # Security: the name reaches `podman logs`; a strict pattern leaves no room for shell
    # syntax, a leading '-' (flag injection such as '--help' or '--latest') or a second word.
    if not isinstance(name, str) or not CONTAINER_NAME.fullmatch(name):
        raise InputError(
            f"container={name!r}: a container name is 1-128 of A-Z a-z 0-9 _ . - and starts with a letter "
            "or digit; give the name `podman ps -a` shows on the host"
        )
    return name


def check_remote_path(path: str, roots: Sequence[str], host: str, *, argument: str = "log") -> str:
    """The path, if it is a plain absolute path under one of the host's log roots.

    argument is the tool argument (or config key) the path came from; messages name it.

    This is the lexical check, made here; the program checks again on the host after
    resolving symlinks, which only the host can see.
    """
    if not isinstance(path, str) or not path:
        kind = "ledger file" if argument == "log" else "file"
        raise InputError(f"{argument}={path!r}: give the absolute path of the {kind} on host {host}")
    # Security: NUL, newline and other control characters could end the command line or a
    # quoted word early and smuggle a second command; no log file needs them.
    if CONTROL.search(path):
        raise InputError(f"{argument}={path!r}: a path may not hold NUL, newline or other control characters")
    if len(path) > MAX_PATH_CHARS:
        raise InputError(f"{argument}=...: the path is {len(path)} characters; at most {MAX_PATH_CHARS}")
    # The command travels as UTF-8: a lone surrogate (the CLI's stand-in for a byte that is not
    # UTF-8) cannot be encoded into it.
    try:
        path.encode()
    except UnicodeEncodeError:
        raise InputError(f"{argument}={path!r}: a path must be UTF-8 text; give the file a UTF-8 name on "
                         f"host {host}") from None
    # Security: a leading '-' would be read as an option by the tools it is handed to.
    if path.startswith("-"):
        raise InputError(f"{argument}={path!r}: a path may not start with '-'; give it from '/'")
    if not path.startswith("/"):
        raise InputError(f"{argument}={path!r}: give an absolute path on host {host} (it starts with '/')")
    # Security: '..' (or '.', '//') would let a path named under a root climb out of it.
    parts = path.split("/")[1:]
    if any(part in ("", ".", "..") for part in parts) or posixpath.normpath(path) != path:
        raise InputError(
            f"{argument}={path!r}: write the path without '.', '..', '//' or a trailing '/'; "
            f"it must name a file under the log roots of host {host} plainly"
        )
    if not roots:
        raise InputError(
            f"{argument}={path!r}: host {host} lists no log_roots, so no file there may be read by path; "
            f"add log_roots = [\"/dir/of/logs\"] under [hosts.{host}] in the fleet config, or name a service"
        )
    for root in roots:
        base = root.rstrip("/")
        if path.startswith(base + "/"):
            return path
    listed = ", ".join(roots)
    raise InputError(
        f"{argument}={path!r} is outside the log roots of host {host} ({listed}); add its directory to "
        f"[hosts.{host}] log_roots in the fleet config, or name a service instead"
    )


def check_boot(boot: int) -> int:
    if isinstance(boot, bool) or not isinstance(boot, int) or boot == 0 or abs(boot) > MAX_BOOT:
        raise InputError(f"boot={boot!r}: give -1 (newest), -2, ... or 1 (oldest), 2, ...; never 0")
    return boot


MODE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
"""A serve script's mode name (use fullmatch): one plain word, never an option."""

CKSUM = re.compile(r"[0-9]{1,20} [0-9]{1,20}")
"""'<crc> <bytes>' as cksum prints them (use fullmatch)."""


def check_mode(mode: str) -> str:
    # Security: the mode becomes one argv word of the serve script. A leading '-' would make it
    # an option of the script ('--help', '-x'); blanks, quotes, '$', ';' or a newline have no
    # place in a mode name, so the pattern leaves nothing a shell or the script could misread.
    if not isinstance(mode, str) or not MODE_PATTERN.fullmatch(mode):
        raise InputError(
            f"mode={mode!r} is not a mode name: letters, digits, '.', '_', '+', '-' only, at most 64, not starting "
            "with '-'; check_serve_script lists the script's modes"
        )
    return mode


def check_cksum(cksum: str) -> str:
    # Security: the cksum came back from the host and goes into the next command: digits only.
    if not CKSUM.fullmatch(cksum):
        raise InputError(f"cksum={cksum!r}: expected '<crc> <bytes>' as cksum prints them; read the script again")
    return cksum


def sent_path(text: str) -> str:
    """A path already checked by check_remote_path, checked again where it enters a command."""
    if not text.startswith("/") or CONTROL.search(text):
        raise InputError(f"{text!r}: a remote path is absolute and holds no control characters")
    return text


def call_line(function: str, words: Sequence[str]) -> str:
    """One call of a host program's function: each argument one shell-quoted word."""
    return " ".join([function, *(shlex.quote(word) for word in words)])
