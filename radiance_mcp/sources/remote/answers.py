"""What a section of a host's answer means: the cut boot, an engine log's lines, the file, the dry run, or the error.

Each error names the tool argument, the host, the rule and the remedy; the codes are the X
lines the programs write (framing.py lists them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from radiance_mcp.core.boot import CutBoot
from radiance_mcp.core.errors import InputError, LedgerError, RemoteError, SourceError
from radiance_mcp.core.ledger import select_boot
from radiance_mcp.core.rules.remote_words import CKSUM
from radiance_mcp.sources.remote.framing import Frame, Section
from radiance_mcp.sources.remote.records import (
    STDERR_TAIL_BYTES,
    DryRun,
    EngineLines,
    EngineRequest,
    FileRequest,
    LogRequest,
    RemoteText,
)


def section_boot(section: Section, request: LogRequest, host: str) -> CutBoot:
    """The section's boot, or the error its code names (input, rule and remedy)."""
    label = request.label
    if section.failure:
        raise RemoteError(section.failure)
    if section.error:
        code, *args = section.error
        if code == "nophrase":
            raise LedgerError(f"{label}: no radiance ledger phrase in the log; point the tool at the boot log (for a "
                              "vLLM, SGLang or llama.cpp log, name the service's engine in the fleet config)")
        if code == "range" and args and args[0].isdigit():
            select_boot(request.boot, int(args[0]), label)  # raises the reader's own wording
        _refuse_section(section, label, request.name, request.roots, host, "the ledger command")
    if section.index is None or section.boots_seen is None or section.skipped is None or section.span is None:
        raise RemoteError(f"{label}: host {host} sent an incomplete answer; try again")
    first, last = section.span
    if section.base is not None:
        offset, need = section.base
        return CutBoot(-need, None, tuple(section.lines), section.skipped, first, last, lines_from_byte=offset)
    return CutBoot(section.index, section.boots_seen, tuple(section.lines), section.skipped, first, last)



def engine_lines(section: Section, request: EngineRequest, host: str) -> EngineLines:
    """The section's lines of another engine's log, or the error its code names (input, rule and remedy)."""
    if section.error:
        _refuse_section(section, request.label, request.name, request.roots, host, "the engine log read")
    if section.skipped is None or section.span is None:
        raise RemoteError(f"{request.label}: host {host} sent an incomplete answer; try again")
    return EngineLines(tuple(section.lines), section.skipped, section.span[1], section.dropped)


def _refuse_section(section: Section, label: str, name: str, roots: Sequence[str], host: str, what: str) -> NoReturn:
    """Raise what a failed log read's X line says: the file, the log, podman, or the host's tools."""
    assert section.error is not None
    code, *args = section.error
    _refuse_file(code, label, roots, host)
    if code == "empty":
        raise LedgerError(f"{label}: the log is empty; nothing was booted or the wrong file was named")
    if code == "nopodman":
        raise SourceError(f"{label}: podman is not on the PATH of the SSH user on host {host}; "
                          "install it, or log in as the user that runs the container")
    if code == "podman":
        status = args[0] if args else "?"
        said = f": {section.podman_error.strip()[:300]!r}" if section.podman_error else ""
        why = ("it was killed after the time limit" if status in ("137", "124") else
               "it could not be run to its end" if status == "-1" else f"it exited with status {status}")
        raise SourceError(
            f"{label}: `podman logs {name}` failed on host {host}: {why}{said}; check the name "
            "with `podman ps -a` on the host, as the SSH user"
        )
    raise RemoteError(f"{label}: {what} failed on host {host} ({' '.join(section.error)}); "
                      "the host needs POSIX sh, grep, awk and coreutils (readlink -f, head -c, tail -c)")


def _refuse_file(code: str, label: str, roots: Sequence[str], host: str) -> None:
    """Raise what real_path_under_roots's code says about any file (a ledger, a script, an env file); else return."""
    if code == "missing":
        raise SourceError(f"{label}: no such file on host {host}; check the path (`ls -l` it there) or the fleet "
                          "config's entry")
    if code == "outside":
        raise InputError(
            f"{label}: the file's real path on host {host} (symlinks followed there) lies outside the allowed "
            f"log roots ({', '.join(roots)}); add its real directory to [hosts.{host}] log_roots in the fleet config"
        )
    if code == "notfile":
        raise SourceError(f"{label}: not a regular file on host {host} (a directory, FIFO or device); name the "
                          "file itself")
    if code == "unreadable":
        raise SourceError(f"{label}: permission denied on host {host}; the SSH user cannot read it (give it read "
                          "access, or set user = ... for the host in the fleet config)")


def _file_error(frame: Frame, path: str, argument: str, roots: Sequence[str], host: str) -> None:
    """Raise what the section's X line says about a file (read or run), naming the argument and the remedy."""
    code, *args = frame.fields["X"] or ["?"]
    label = f"{argument}={path!r}"
    _refuse_file(code, label, roots, host)
    if code == "toolarge" and args and args[0].isdigit():
        raise SourceError(f"{label} on host {host} is {int(args[0]):,} bytes: over the cap, so not a serve script "
                          "or env file; name the right file")
    if code == "changed":
        raise SourceError(f"{label} on host {host} changed between the check of its text and the dry run, so it "
                          "was not run; run compare_dry_run again")
    if code == "notimeout":
        raise SourceError(f"{label}: host {host} has no `timeout` (coreutils) on the SSH user's PATH, and a dry run "
                          "is never started there without a time limit; install coreutils there, or paste the two "
                          "dry-run outputs as proven_argv and candidate_argv")
    if code == "nobash":
        raise SourceError(f"{label} on host {host} has no exec bit and there is no bash to run it with; chmod +x it")
    raise RemoteError(f"{label}: the command failed on host {host} ({' '.join(frame.fields['X'])}); the host needs "
                      "POSIX sh and coreutils (readlink -f, head -c, tail -c, cksum)")


def file_text(frame: Frame, request: FileRequest, host: str, cap_bytes: int) -> RemoteText | None:
    """The file the section holds, None for an optional file that is not there, or the error."""
    if "X" in frame.fields:
        if request.optional and frame.fields["X"][:1] == ["missing"]:
            return None
        _file_error(frame, request.path, request.argument, request.roots, host)
    data = frame.blocks.get("D")
    cksum = " ".join(frame.fields.get("D", []))
    if data is None or not CKSUM.fullmatch(cksum):
        raise RemoteError(f"{request.argument}={request.path!r}: host {host} sent an incomplete answer; try again")
    if len(data) > cap_bytes:
        raise SourceError(f"{request.argument}={request.path!r} on host {host} is over {cap_bytes // 1024:,} KiB: "
                          "not a serve script or env file; name the right file")
    return RemoteText(request.path, data, cksum)


def dry_run_result(frame: Frame, mode: str, script: str, roots: Sequence[str], host: str,
                   *, nonce: str, timeout_s: int) -> DryRun:
    """The section's dry run (stdout, status, stderr's end), or the error its X line names."""
    if "X" in frame.fields:
        _file_error(frame, script, "script", roots, host)
    how = frame.fields.get("A", [])
    stdout, tail = frame.blocks.get("D"), frame.blocks.get("W")
    if how not in (["exec"], ["bash"]) or stdout is None or tail is None:
        raise RemoteError(f"script={script!r}: host {host} sent an incomplete answer for mode {mode!r}; try again")
    command = (script,) if how == ["exec"] else ("bash", script)
    err, _, last = tail.rstrip(b"\n").rpartition(b"\n")
    words = last.decode("ascii", "replace").split(" ")
    status = int(words[1]) if len(words) == 2 and words[0] == nonce and words[1].isdigit() else None
    text = (err if status is not None else tail).decode("utf-8", "replace")
    return DryRun(mode, (*command, mode, "--dry-run"), stdout, status, text[-STDERR_TAIL_BYTES:], timeout_s)


