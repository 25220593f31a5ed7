"""The commands sent to a host: a fixed program from programs/, its settings, one quoted call per read.

Four programs run on a host, nothing else: the ledger read (programs/ledger_read.sh and the
awk programs it runs), the read of another engine's log (engine_read.sh with engine_lines.awk:
vLLM, SGLang, llama.cpp), the read of a serve script and its env file (read_files.sh), and the
dry runs of two modes (dry_run.sh); each begins with common.sh. They are read once, with
importlib.resources, and sent without their comment lines. Only the settings and the call
lines after the program change from one command to the next, and every word in them is
checked by rules.py and then quoted.
"""

from __future__ import annotations

import functools
import math
import shlex
from collections.abc import Sequence
from importlib.resources import files

from radiance_mcp.core.engines import ENGINES, EngineName, engine_words
from radiance_mcp.core.errors import InputError
from radiance_mcp.core.ledger import BOOT_MARKER, KEYWORDS, MAX_LINE_BYTES
from radiance_mcp.core.rules.remote_words import (
    call_line,
    check_boot,
    check_cksum,
    check_container,
    check_mode,
    sent_path,
)
from radiance_mcp.sources.ledger_file.file_state import RACY_NS
from radiance_mcp.sources.remote.framing import STAT_FIELDS, check_nonce, wrap
from radiance_mcp.sources.remote.records import STDERR_TAIL_BYTES, EngineRequest, FileRequest, LogRequest, ReadMark
from radiance_mcp.sources.remote.targets import Limits


def _check_words(words: Sequence[str], where: str) -> None:
    """Words that travel as grep patterns (-e each) and as one awk variable split on '|'."""
    if any(not k or "|" in k or "\\" in k or "\n" in k for k in words):
        # The awk variable goes through awk's escape processing and a split on '|'.
        raise RuntimeError(f"{where}: a word holding '|', '\\' or a newline needs another separator here")


_check_words(KEYWORDS, "ledger.KEYWORDS")
for _engine in (*ENGINES, None):
    _check_words(engine_words(_engine), f"engine_words({_engine!r})")


def program_text(name: str) -> str:
    """One file of programs/, as written (with its comments)."""
    return files("radiance_mcp.sources.remote").joinpath("programs", name).read_text(encoding="utf-8")


def _strip_comments(program: str) -> str:
    """The program without its comment lines: they are for the reader of the file, not the host."""
    return "\n".join(line for line in program.splitlines() if not line.lstrip().startswith("# "))


def _awk_setting(variable: str, name: str) -> str:
    """An awk program (or a part of one) as a sh variable, in single quotes (so its code may hold none)."""
    text = _strip_comments(program_text(name))
    if "'" in text:
        raise RuntimeError(f"programs/{name}: the awk programs sit in single quotes in the sh program: no ' inside")
    return f"{variable}='\n{text}\n'"


@functools.cache
def _ledger_program() -> str:
    """common.sh and ledger_read.sh, with the fixed settings drawn from the ledger's phrase table."""
    patterns = " ".join(f"-e {shlex.quote(k)}" for k in KEYWORDS)
    return _strip_comments("\n".join([
        program_text("common.sh"),
        program_text("ledger_read.sh"),
        f"marker={shlex.quote(BOOT_MARKER)}",
        f"keywords={shlex.quote('|'.join(KEYWORDS))}",
        f"max_line_bytes={MAX_LINE_BYTES}",
        f"overlap_bytes={MAX_LINE_BYTES + 1}",
        f"phrase_lines() {{ grep -a -n \"$@\" -F {patterns}; }}",
        _awk_setting("cut_awk", "cut.awk"),
        _awk_setting("grep_awk", "cut_grep.awk"),
        _awk_setting("files_awk", "cut_files.awk"),
        _awk_setting("marks_awk", "marks.awk"),
        _awk_setting("back_awk", "back.awk"),
        _awk_setting("last_awk", "last.awk"),
    ]))


@functools.cache
def _engine_program(engine: EngineName | None) -> str:
    """common.sh and engine_read.sh, with the engine's words (every engine's for None) as fixed settings."""
    words = engine_words(engine)
    patterns = " ".join(f"-e {shlex.quote(w)}" for w in words)
    return _strip_comments("\n".join([
        program_text("common.sh"),
        program_text("engine_read.sh"),
        f"words={shlex.quote('|'.join(words))}",
        f"max_line_bytes={MAX_LINE_BYTES}",
        f"word_lines() {{ grep -a -n \"$@\" -F {patterns}; }}",
        _awk_setting("lines_awk", "engine_lines.awk"),
    ]))


@functools.cache
def _program(name: str) -> str:
    return _strip_comments(program_text("common.sh") + "\n" + program_text(name))


def _time_limit(seconds: int) -> str:
    """time_limit: `timeout -s KILL <seconds>` where the host has timeout, else empty."""
    return f"if command -v timeout > /dev/null 2>&1; then time_limit='timeout -s KILL {seconds}'; else time_limit=; fi"


SETTLE_S = RACY_NS // 1_000_000_000
"""A file whose inode changed (ctime) this many seconds or more before a read is settled: a later write cannot
leave its ctime as that read's stat saw it (file systems keep times in steps of up to 2 s; a program can set
mtime back, never ctime), so the next read that finds the same stat (device, inode, size, mtime, ctime) may send
back the last answer without reading a byte."""


def build_command(
    requests: Sequence[LogRequest], *, nonce: str, checkpoints: Sequence[ReadMark | None], timeout_s: float,
    count_before_bytes: int = Limits.count_before_bytes, small_file_bytes: int = Limits.small_file_bytes,
    small: Sequence[bool] = (),
) -> str:
    """The ledger read: the fixed program, then one quoted call per request, then the cut of the small files.

    small[i] True: request i is a file the last read found small; it is queued for the one pass
    over every small file at the end without its size taken first (the host reads it as any
    other file if it has grown past small_file_bytes).
    """
    settings = [
        f"nonce={check_nonce(nonce)}",
        f"count_before_max={int(count_before_bytes)}",
        f"small_file_max={int(small_file_bytes)}",
        f"settle_s={SETTLE_S}",
        # A hung `podman logs` is killed on the host too, so no stuck process stays behind.
        _time_limit(math.ceil(timeout_s) + 2),
    ]
    calls = []
    small = small or [False] * len(requests)
    # The files whose last read left their stat: stat_wanted takes every one's in one process first.
    wanted = [call_line("want_stat", [sent_path(r.name), *(sent_path(root) for root in r.roots)])
              for r, checkpoint, known_small in zip(requests, checkpoints, small, strict=True)
              if r.kind == "file" and not known_small and r.boot == -1 and _stat_word(checkpoint) != "-"]
    if wanted:
        calls.extend([*wanted, "stat_wanted"])
    for i, (request, checkpoint, known_small) in enumerate(zip(requests, checkpoints, small, strict=True)):
        boot = check_boot(request.boot)
        if request.kind == "podman":
            calls.append(call_line("read_podman_logs", [str(i), str(boot), check_container(request.name)]))
            continue
        if known_small:
            calls.append(call_line("queue_ledger_file", [str(i), str(boot), sent_path(request.name),
                                                         *(sent_path(r) for r in request.roots)]))
            continue
        if checkpoint is None or not _resumable(checkpoint):
            resume, anchor = ["-"] * 10, ""
        else:
            resume = [checkpoint.inode, str(checkpoint.offset), str(checkpoint.line), str(checkpoint.boot),
                      str(len(checkpoint.text.encode())), *_tail_words(checkpoint),
                      "-" if checkpoint.base is None else str(checkpoint.base),
                      _stat_word(checkpoint)]
            anchor = checkpoint.text
        # The anchor's text reaches awk through the environment (no escape processing), quoted.
        calls.append(f"anchor_text={shlex.quote(anchor)}")
        calls.append(call_line("read_ledger_file", [str(i), str(boot), sent_path(request.name), *resume,
                                                    *(sent_path(r) for r in request.roots)]))
    calls.append("cut_queued")
    return wrap(_ledger_program(), settings, calls)


def _resumable(checkpoint: ReadMark) -> bool:
    """The checkpoint can go back to the host: its anchor text holds no NUL and no newline."""
    return "\x00" not in checkpoint.text and "\n" not in checkpoint.text


def _stat_word(checkpoint: ReadMark | None) -> str:
    """The file's stat when its last read stopped at its end, settled; '-' when not known. Security: it goes back
    into the host's command, so it is held to the digits the framing took (framing.STAT_FIELDS) again here."""
    if (checkpoint is None or not _resumable(checkpoint) or checkpoint.tail_offset is None
            or not STAT_FIELDS.fullmatch(checkpoint.stat)):
        return "-"
    return checkpoint.stat


def _tail_words(checkpoint: ReadMark) -> list[str]:
    if checkpoint.tail_offset is None or checkpoint.tail_line is None or not checkpoint.tail_cksum:
        return ["-", "-", "-"]
    return [str(checkpoint.tail_offset), str(checkpoint.tail_line), checkpoint.tail_cksum]


def build_engine_command(request: EngineRequest, *, nonce: str, timeout_s: float, cap_bytes: int) -> str:
    """Another engine's log: the lines holding its words (at most cap_bytes of them, the newest), numbered."""
    if request.engine is not None and request.engine not in ENGINES:
        raise InputError(f"engine={request.engine!r}: expected one of {', '.join(ENGINES)}")
    settings = [
        f"nonce={check_nonce(nonce)}",
        f"lines_cap={int(cap_bytes)}",
        _time_limit(math.ceil(timeout_s) + 2),
    ]
    if request.kind == "podman":
        call = call_line("read_engine_podman", ["0", check_container(request.name)])
    else:
        call = call_line("read_engine_file", ["0", sent_path(request.name), *(sent_path(r) for r in request.roots)])
    return wrap(_engine_program(request.engine), settings, [call])


def build_files_command(requests: Sequence[FileRequest], *, nonce: str, cap_bytes: int) -> str:
    """Read each file (at most cap_bytes) on the host, all in one command."""
    calls = [call_line("send_file", [str(i), str(int(cap_bytes)), sent_path(request.path),
                                     *(sent_path(r) for r in request.roots)])
             for i, request in enumerate(requests)]
    return wrap(_program("read_files.sh"), [f"nonce={check_nonce(nonce)}"], calls)


def build_dry_run_command(
    script: str, cksum: str, modes: Sequence[str], roots: Sequence[str], *, nonce: str, timeout_s: float,
    cap_bytes: int,
) -> str:
    """'<script> <mode> --dry-run' for each mode, one after the other, in one command."""
    check_nonce(nonce)
    check_cksum(cksum)
    if not (isinstance(timeout_s, int | float) and 0 < timeout_s <= 3600):
        raise InputError(f"timeout_s={timeout_s!r}: give a number of seconds above 0 and at most 3600")
    settings = [
        f"nonce={nonce}",
        f"output_cap={int(cap_bytes)}",
        f"stderr_cap={STDERR_TAIL_BYTES + 128}",
        _time_limit(math.ceil(timeout_s)),
    ]
    calls = [call_line("dry_run", [str(i), sent_path(script), cksum, check_mode(mode),
                                   *(sent_path(r) for r in roots)])
             for i, mode in enumerate(modes)]
    return wrap(_program("dry_run.sh"), settings, calls)
