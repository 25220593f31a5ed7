'''The framing protocol: how a program travels to a host and how its answer is told from data.

A command is one line for the host's login shell, ``REMOTE_COMMAND``; the program arrives on
its stdin as one compound command (``wrap``) that sh reads whole before running any of it.
Every control line of the answer starts with ``#<nonce> ``: the nonce is random per command
(``new_nonce``, checked by ``check_nonce`` before it enters a command), so no log line, file
byte or dry-run output can pass for a control line. The answer ends with ``#<n> Z``.

The ledger read (``parse_output``), one line each::

    #<n> S <i>                          section i begins (one per log, in request order)
    #<n> B <i> <boot> <boots_seen>      the boot cut out, 1 = oldest, and how many there are
    <line number>:<text>                a phrase line of that boot
    #<n> K <i> <skipped>                end of section i; keyword lines over MAX_LINE_BYTES skipped
    #<n> R <i> <first> <last>           the boot's first and last line numbers in the log
    #<n> C <i> <inode> <offset> <line> <boot> <base> <text>  the newest boot marker: the next read's
                                        anchor (base: '-', or the offset its line and boot count from)
    #<n> O <i> <offset> <n>             the boot's lines count from 1 at the line at offset (those
                                        before were not counted); it is the n-th boot from the end
    #<n> T <i>                          the lines continue the boot the last read cut (files)
    #<n> U <i> <offset> <line> <cksum>  where this read of the newest boot stopped: the next one goes on
    #<n> N <i>                          nothing was added since that stop: the last read's answer stands
    #<n> F <i> <dev> <ino> <size> <mtime> <ctime>  the file's stat when this read stopped at its end,
                                        settled: the next read that finds the same sends N, reading nothing
    #<n> H <i>                          the file was read whole with the command's other small files
    #<n> X <i> <code> [<number>]        section i failed: missing, outside, notfile, ...
    #<n> E <i> <text>                   podman's last error line, for the message
    #<n> Z                              the command ran to its end

The engine log read (``parse_output`` too) sends S, the numbered lines holding one of the
engine's words, K, R (1 and the log's last line), X and E as above, and::

    #<n> L <i> <dropped>                the oldest <dropped> lines holding a word were not sent (the cap)

The file read and the dry runs (``parse_frames``): a file's bytes, or a dry run's output,
travel between a D (or W) line and a Y line of the nonce, so no byte of them can end the
block early or pass for a control line::

    #<n> S <i>                  section i begins
    #<n> X <i> <code> [<n>]     section i failed: missing, outside, notfile, unreadable,
                                toolarge <bytes>, changed, notimeout, nobash
    #<n> D <i> [<crc> <bytes>]  data follows (a file: with its cksum; a dry run: its stdout)
    #<n> A <i> exec|bash        how the dry run's script was started (exec bit, or bash)
    #<n> W <i>                  the end of the dry run's stderr follows, then "<n> <status>"
    \\n#<n> Y <i>                the block ends (the newline before it is not data)
    #<n> Z                      the command ran to its end
'''

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from radiance_mcp.core.boot import Line
from radiance_mcp.core.errors import RemoteError
from radiance_mcp.core.ledger import BOOT_MARKER, clean
from radiance_mcp.sources.remote.records import ReadMark
from radiance_mcp.sources.remote.targets import SSHTarget

REMOTE_COMMAND = "exec /bin/sh -s"
"""The only command line a host's login shell is given; the program arrives on its stdin.

Any login shell (bash, zsh, fish, tcsh) runs this line alike, and the program, which only
/bin/sh interprets, never goes through the login shell's quoting rules (nor into `ps`).
"""

_NONCE = re.compile(r"[0-9a-f]{16,64}")


def new_nonce() -> str:
    """A fresh nonce for one command: 32 hex digits no log line can guess."""
    return secrets.token_hex(16)


def check_nonce(nonce: str) -> str:
    """The nonce, if it is hex: it enters the command as a bare word."""
    if not _NONCE.fullmatch(nonce):
        raise ValueError("the nonce is hex")
    return nonce


def wrap(program: str, settings: Sequence[str], calls: Sequence[str]) -> str:
    """The text sent on stdin: the fixed program, its settings, the call lines, then the end marker.

    One compound command: sh reads all of it before running any, and nothing the program runs
    can read the rest of the script from stdin.
    """
    return "{\n" + "\n".join([program, *settings, *calls, "control_line Z"]) + "\n} < /dev/null\n"


def check_finished(output: bytes, finished: bool, target: SSHTarget, what: str) -> None:
    """A RemoteError unless the program's end marker arrived; an empty answer is told apart."""
    if finished:
        return
    if not output:
        # Exit status 0 and not one byte: the shell never got the program. A ForceCommand, a
        # forced command= in authorized_keys, or an SSH server that drops the session's stdin.
        raise RemoteError(
            f"{target.where()}: the host sent nothing back for {what}: the command `{REMOTE_COMMAND}` ended at once "
            "with status 0, so the program sent on its stdin never ran there. A ForceCommand (sshd_config) or "
            "command=\"...\" (authorized_keys) replaces the command, or the SSH server does not pass stdin on; "
            f"check that `echo echo ok | ssh <host> {REMOTE_COMMAND}` prints ok, and lift the forced command for "
            "this key"
        )
    raise RemoteError(
        f"{target.where()}: the answer for {what} stopped before its end (the command was cut off); "
        "try again; if it repeats, run the read by hand over ssh to see what stops it"
    )


def _control(body: str, count: int) -> tuple[str, int, str] | None:
    """A control line after its '#<nonce> ': its kind, section (-1 for the end marker Z) and the rest.

    None for a section number out of range: the line is ignored.
    """
    kind, _, rest = body.partition(" ")
    if kind == "Z":
        return kind, -1, ""
    number, _, rest = rest.partition(" ")
    if not number.isdigit() or int(number) >= count:
        return None
    return kind, int(number), rest


# ---------------------------------------------------------------------------------------
# The ledger read's answer


_CHECKPOINT_FIELDS = re.compile(r"(\d+) (\d+) (\d+) (\d+) (-|\d+) (.+)")
_TAIL_FIELDS = re.compile(r"(\d+) (\d+) (\d+ \d+)")
STAT_FIELDS = re.compile(r"[0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+")  # ASCII digits (\d takes any script's digits)


@dataclass
class Section:
    lines: list[Line] = field(default_factory=list)
    index: int | None = None
    boots_seen: int | None = None
    skipped: int | None = None
    error: list[str] | None = None
    podman_error: str = ""
    checkpoint: ReadMark | None = None
    span: tuple[int, int] | None = None
    continued: bool = False
    tail: tuple[int, int, str] | None = None
    base: tuple[int, int] | None = None
    """(offset, n): line numbers count from the line at offset; the boot is the n-th from the end."""
    failure: str = ""
    """Set when the answer cannot be used (the message)."""
    unchanged: bool = False
    stat: str = ""
    """The file's stat when the read stopped at its end, settled (an F line): the next read compares it."""
    whole: bool = False
    """The file was small and read whole (the next read may queue it without taking its size)."""
    dropped: int = 0
    """An engine log read: lines holding a word the host did not send (over the cap; the oldest)."""


def parse_output(raw: bytes, *, nonce: str, count: int) -> tuple[list[Section], bool]:
    """Split the command's output into its sections; True if the end marker arrived."""
    prefix = f"#{check_nonce(nonce)} "
    sections = [Section() for _ in range(count)]
    current: Section | None = None
    finished = False
    for text in raw.decode("utf-8", "replace").split("\n"):
        if text.startswith(prefix):
            control = _control(text[len(prefix):], count)
            if control is None:
                continue
            kind, number, rest = control
            if kind == "Z":
                finished = True
                continue
            section = sections[number]
            if kind == "S":
                current = section
            elif kind == "B":
                index, _, seen = rest.partition(" ")
                section.index, section.boots_seen = int(index), int(seen)
            elif kind == "K":
                section.skipped = int(rest or 0)
            elif kind == "L":
                section.dropped = int(rest) if rest.isdigit() else 0
            elif kind == "T":
                section.continued = True
            elif kind == "N":
                section.unchanged = True
            elif kind == "H":
                section.whole = True
            elif kind == "O":
                offset, _, need = rest.partition(" ")
                if offset.isdigit() and need.isdigit():  # digits only: the offset goes back into the next command
                    section.base = (int(offset), int(need))
            elif kind == "U":
                found_tail = _TAIL_FIELDS.fullmatch(rest)
                if found_tail:  # digits only: they go back into the next command
                    section.tail = (int(found_tail[1]), int(found_tail[2]), found_tail[3])
            elif kind == "F":
                if STAT_FIELDS.fullmatch(rest):  # digits only: they go back into the next command
                    section.stat = rest
            elif kind == "R":
                first, _, last = rest.partition(" ")
                if first.isdigit() and last.isdigit():
                    section.span = (int(first), int(last))
            elif kind == "X":
                section.error = rest.split(" ")
            elif kind == "E":
                section.podman_error = rest
            elif kind == "C":
                # Security: this came from the host and goes back into the next command:
                # plain digits, and a marker line that is quoted there and compared, never run.
                found = _CHECKPOINT_FIELDS.fullmatch(rest)
                if found:
                    inode, offset, line, boot, base, marker = found.groups()
                    if BOOT_MARKER in marker and "\x00" not in marker and "\ufffd" not in marker:
                        section.checkpoint = ReadMark(inode, int(offset), int(line), int(boot), marker,
                                                        base=None if base == "-" else int(base))
        elif current is not None:
            line_number, sep, body = text.partition(":")
            if sep and line_number.isdigit():
                current.lines.append(Line(int(line_number), clean(body)))
    return sections, finished


# ---------------------------------------------------------------------------------------
# The file read's and the dry runs' answer


@dataclass
class Frame:
    fields: dict[str, list[str]] = field(default_factory=dict)
    blocks: dict[str, bytes] = field(default_factory=dict)


def parse_frames(raw: bytes, *, nonce: str, count: int) -> tuple[list[Frame], bool]:
    """The control lines and data blocks of each section; True if the end marker arrived."""
    prefix = f"#{check_nonce(nonce)} ".encode()
    frames = [Frame() for _ in range(count)]
    finished = False
    position = 0
    while position < len(raw):
        end = raw.find(b"\n", position)
        end = len(raw) if end < 0 else end
        line, position = raw[position:end], end + 1
        if not line.startswith(prefix):
            continue
        control = _control(line[len(prefix):].decode("ascii", "replace"), count)
        if control is None:
            continue
        kind, number, rest = control
        if kind == "Z":
            finished = True
            continue
        frame = frames[number]
        frame.fields[kind] = rest.split()
        if kind in ("D", "W"):
            closing = b"\n" + prefix + f"Y {number}\n".encode()
            stop = raw.find(closing, position)
            if stop < 0:
                break  # cut off inside the block: no Z follows, the caller says so
            frame.blocks[kind] = raw[position:stop]
            position = stop + len(closing)
    return frames, finished


