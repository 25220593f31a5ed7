"""SSH to the fleet's hosts: what may be sent, the programs a host runs, the answers, the pool.

Four programs run on a host, nothing else: the ledger read, the read of another engine's log
(vLLM, SGLang, llama.cpp), the read of a serve script and its env file, and two modes' dry
runs. Each is fixed sh (and awk) text sent on the stdin of one command line,
``exec /bin/sh -s``, followed by call lines whose every argument is checked, then quoted, so
no text an agent sends, and no text the host sends back, can become shell syntax. A ledger
read cuts the requested boot out on the host and sends back only its phrase lines, numbered,
so a 1 GiB log of 50 boots moves a few KiB; an engine log read sends only the lines holding
one of that engine's words, numbered, for its dialect (radiance_mcp.core.engines) to read here.

What lives where (imports go down this list, never up; nothing here imports the tools, MCP,
the CLI or the simulator; only the core's ledger, engines, constants and errors)::

    targets.py    SSHTarget (a host entry) and Limits
    records.py    what is asked (LogRequest, EngineRequest, FileRequest) and what comes back
                  (CutBoot, ReadMark, EngineLines, RemoteText, DryRun): plain records
    rules.py      argument rules: each word checked, then quoted into a call line
    programs/     the host programs: common.sh (first in each), ledger_read.sh with cut.awk,
                  marks.awk, back.awk, last.awk; engine_read.sh with engine_lines.awk;
                  read_files.sh; dry_run.sh (linted by shellcheck)
    framing.py    the output protocol: REMOTE_COMMAND, the nonce, the wrapper, parsing the answer
    commands.py   a program from programs/ plus its settings and call lines: the text sent
    answers.py    what a section of the answer means: a boot, a file, a dry run, or the error
    connect.py    connecting, host keys verified against known_hosts
    kept.py       Kept: what a read leaves for the next (checkpoints, parses), per host entry and bounded
    pool.py       SSHPool: connections per host entry, limits, batching, checkpoints

Every use of asyncssh lives in connect.py and pool.py, imported inside the functions that need
it, so importing this package (and starting the server) does not load it. Host keys are always
verified against known_hosts; nothing here can turn that off.
"""

from radiance_mcp.core.boot import CutBoot
from radiance_mcp.core.rules.remote_words import (
    CONTAINER_NAME,
    MODE_PATTERN,
    check_boot,
    check_container,
    check_mode,
    check_remote_path,
)
from radiance_mcp.sources.remote.answers import dry_run_result, file_text, section_boot
from radiance_mcp.sources.remote.commands import (
    build_command,
    build_dry_run_command,
    build_engine_command,
    build_files_command,
)
from radiance_mcp.sources.remote.connect import connect, known_hosts_files
from radiance_mcp.sources.remote.framing import REMOTE_COMMAND, parse_frames, parse_output
from radiance_mcp.sources.remote.kept import MAX_CHECKPOINTS, MAX_KEPT_BYTES, Kept
from radiance_mcp.sources.remote.pool import MAX_BATCH, MAX_SMALL_BATCH, Doing, SSHPool, Transfer
from radiance_mcp.sources.remote.records import (
    STDERR_TAIL_BYTES,
    DryRun,
    EngineLines,
    EngineRequest,
    FileRequest,
    LogRequest,
    ReadMark,
    RemoteText,
)
from radiance_mcp.sources.remote.targets import Limits, SSHTarget

__all__ = [
    "CONTAINER_NAME",
    "MAX_BATCH",
    "MAX_CHECKPOINTS",
    "MAX_KEPT_BYTES",
    "MAX_SMALL_BATCH",
    "MODE_PATTERN",
    "REMOTE_COMMAND",
    "STDERR_TAIL_BYTES",
    "ReadMark",
    "CutBoot",
    "Doing",
    "Kept",
    "DryRun",
    "EngineLines",
    "EngineRequest",
    "FileRequest",
    "Limits",
    "LogRequest",
    "RemoteText",
    "SSHPool",
    "SSHTarget",
    "Transfer",
    "build_command",
    "build_dry_run_command",
    "build_engine_command",
    "build_files_command",
    "check_boot",
    "check_container",
    "check_mode",
    "check_remote_path",
    "connect",
    "dry_run_result",
    "file_text",
    "known_hosts_files",
    "parse_frames",
    "parse_output",
    "section_boot",
]
