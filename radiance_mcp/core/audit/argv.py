"""The dry-run proof, pure: two printed argv in, byte for byte, the first differing argument out.

A serve script's ``--dry-run`` prints the argv it would exec; two modes are the same
serving shape only when those outputs are identical byte for byte. ``compare_argv`` reads
both in one format (NUL-separated, one argument per line, or a shell line), names the first
differing argument and character, the edits between them and the flags whose values
differ. Nothing here reads a file, runs a script or touches a network.
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass
from typing import Literal

from radiance_mcp.core.errors import InputError

ArgvFormat = Literal["auto", "lines", "shell", "nul"]
ArgvLayout = Literal["lines", "shell", "nul"]


@dataclass(frozen=True)
class ArgvDifference:
    index: int
    """0-based position in the argv."""
    proven: str | None
    """None: the proven argv has no argument at this index."""
    candidate: str | None
    char_offset: int | None
    """First differing character within the argument, where both exist."""
    detail: str


@dataclass(frozen=True)
class ArgvComparison:
    identical_bytes: bool
    identical_argv: bool
    format: ArgvLayout
    proven_argv: tuple[str, ...]
    candidate_argv: tuple[str, ...]
    first_byte_offset: int | None
    first_difference: ArgvDifference | None
    edits: tuple[str, ...]
    """difflib's view of the change (replace / insert / delete), a few at most."""
    flag_changes: tuple[tuple[str, str | None, str | None], ...]
    """(--flag, proven value, candidate value) for flags whose value differs or that one side lacks."""
    summary: str


MAX_EDITS = 10


def split_argv(text: str, fmt: ArgvFormat = "auto", *, label: str = "argv") -> tuple[list[str], ArgvLayout]:
    """The argv a dry run printed, and the format read: NUL-separated, one per line, or a shell line.

    auto: NUL bytes -> nul; several lines with no blank inside any -> one argument per line;
    otherwise a shell command line (backslash-newline continuations joined; quotes honoured).
    """
    chosen: ArgvFormat = fmt
    if chosen == "auto":
        if "\x00" in text:
            chosen = "nul"
        else:
            lines = [line for line in text.replace("\\\n", " ").splitlines() if line.strip()]
            one_per_line = len(lines) > 1 and not any(len(line.strip().split()) > 1 for line in lines)
            chosen = "lines" if one_per_line else "shell"
    if chosen == "nul":
        parts = text.split("\x00")
        if parts and parts[-1] in ("", "\n"):
            parts.pop()
        return parts, "nul"
    if chosen == "lines":
        return text.rstrip("\n").split("\n") if text.strip("\n") else [], "lines"
    try:
        return shlex.split(text.replace("\\\n", " "), comments=False, posix=True), "shell"
    except ValueError as exc:
        raise InputError(
            f"{label}: cannot be read as a shell command line ({exc}); pass argv_format='lines' if the dry run "
            "prints one argument per line, or 'nul' for NUL-separated output"
        ) from exc


def _first_char_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _describe_char(text: str, offset: int) -> str:
    if offset >= len(text):
        return "end of argument"
    char = text[offset]
    return f"{char!r} U+{ord(char):04X}"


def _flag_values(argv: list[str]) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for i, arg in enumerate(argv):
        if not arg.startswith("--") or arg == "--":
            continue
        if "=" in arg:
            flag, value = arg.split("=", 1)
            values.setdefault(flag, value)
        else:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            values.setdefault(arg, None if nxt is None or nxt.startswith("--") else nxt)
    return values


def compare_argv(
    proven: str | bytes,
    candidate: str | bytes,
    fmt: ArgvFormat = "auto",
    *,
    proven_label: str = "proven",
    candidate_label: str = "candidate",
) -> ArgvComparison:
    """Compare two dry-run outputs byte for byte; on a difference, name the first differing argument.

    Both outputs are read in the same format (auto-detected on the proven output), so a
    difference in layout alone shows as a byte difference with identical argv.
    """
    raw_a = proven if isinstance(proven, bytes) else proven.encode("utf-8", "surrogateescape")
    raw_b = candidate if isinstance(candidate, bytes) else candidate.encode("utf-8", "surrogateescape")
    argv_a, used = split_argv(raw_a.decode("utf-8", "surrogateescape"), fmt, label=proven_label)
    argv_b, _ = split_argv(raw_b.decode("utf-8", "surrogateescape"), used, label=candidate_label)
    identical_bytes = raw_a == raw_b
    byte_offset = None
    if not identical_bytes:
        byte_offset = next(
            (i for i, (x, y) in enumerate(zip(raw_a, raw_b, strict=False)) if x != y), min(len(raw_a), len(raw_b))
        )
    first = _first_difference(argv_a, argv_b, proven_label, candidate_label)
    if identical_bytes:
        summary = f"identical, byte for byte ({len(raw_a):,} bytes, {len(argv_a)} arguments)"
    elif first is None:
        summary = (
            f"the same {len(argv_a)} arguments, but the bytes differ at offset {byte_offset} "
            "(layout, quoting or a trailing newline): not identical byte for byte"
        )
    else:
        summary = f"differs: {first.detail}"
    return ArgvComparison(
        identical_bytes=identical_bytes,
        identical_argv=argv_a == argv_b,
        format=used,
        proven_argv=tuple(argv_a),
        candidate_argv=tuple(argv_b),
        first_byte_offset=byte_offset,
        first_difference=first,
        edits=_edits(argv_a, argv_b, proven_label, candidate_label) if first is not None else (),
        flag_changes=_flag_changes(argv_a, argv_b),
        summary=summary,
    )


def _first_difference(
    argv_a: list[str], argv_b: list[str], proven_label: str, candidate_label: str
) -> ArgvDifference | None:
    """The first index where the two argv differ, with the first differing character inside it."""
    for i in range(max(len(argv_a), len(argv_b))):
        a = argv_a[i] if i < len(argv_a) else None
        b = argv_b[i] if i < len(argv_b) else None
        if a == b:
            continue
        if a is not None and b is not None:
            offset = _first_char_difference(a, b)
            detail = (
                f"argument {i}: {proven_label} {a!r}, {candidate_label} {b!r} (first difference at character "
                f"{offset}: {_describe_char(a, offset)} vs {_describe_char(b, offset)})"
            )
            return ArgvDifference(i, a, b, offset, detail)
        if b is None:
            present, value, absent = proven_label, a, candidate_label
        else:
            present, value, absent = candidate_label, b, proven_label
        detail = (
            f"argument {i}: {present} has {value!r}, {absent} has no argument {i} "
            f"({proven_label} {len(argv_a)} arguments, {candidate_label} {len(argv_b)})"
        )
        return ArgvDifference(i, a, b, None, detail)
    return None


def _edits(argv_a: list[str], argv_b: list[str], proven_label: str, candidate_label: str) -> tuple[str, ...]:
    """difflib's replace / insert / delete steps from one argv to the other, MAX_EDITS at most."""
    edits: list[str] = []
    matcher = difflib.SequenceMatcher(a=argv_a, b=argv_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if len(edits) == MAX_EDITS:
            edits.append("... more edits left off")
            break
        if tag == "replace":
            edits.append(f"replace {argv_a[i1:i2]!r} at {i1} with {argv_b[j1:j2]!r}")
        elif tag == "delete":
            edits.append(f"{candidate_label} lacks {argv_a[i1:i2]!r} ({proven_label} index {i1})")
        else:
            edits.append(f"{candidate_label} adds {argv_b[j1:j2]!r} at index {j1}")
    return tuple(edits)


def _flag_changes(argv_a: list[str], argv_b: list[str]) -> tuple[tuple[str, str | None, str | None], ...]:
    """(--flag, proven value, candidate value) for each flag whose value differs or that one side lacks."""
    flags_a, flags_b = _flag_values(argv_a), _flag_values(argv_b)
    return tuple(
        (flag, flags_a.get(flag), flags_b.get(flag))
        for flag in dict.fromkeys([*flags_a, *flags_b])
        if flags_a.get(flag) != flags_b.get(flag) or (flag in flags_a) != (flag in flags_b)
    )
