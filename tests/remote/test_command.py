"""The command template, argument rules and output protocol, without a server (pure functions)."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

import radiance_mcp
from radiance_mcp.core.errors import InputError
from radiance_mcp.core.ledger import BOOT_MARKER, KEYWORDS
from radiance_mcp.sources import remote
from radiance_mcp.sources.remote import LogRequest, ReadMark, build_command, parse_output

NONCE = "0123456789abcdef0123456789abcdef"
ROOTS = ("/home/dank/logs", "/var/log/radiance/")


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("/home/dank/logs/frank_archon.log", None),
        ("/home/dank/logs/sub/qwen38_bf16_fast.log", None),
        ("/var/log/radiance/a b;c$(d)`e`'f\"g.log", None),  # odd but legal names: quoted, never parsed
        ("/home/dank/logs", "outside the log roots"),  # the root itself is not a file under it
        ("/home/dank/logs-evil/a.log", "outside the log roots"),  # a sibling that shares the prefix
        ("/etc/shadow", "outside the log roots"),
        ("/home/dank/logs/../../../etc/shadow", "without '.', '..'"),  # climbs out of the root
        ("/home/dank/logs/./a.log", "without '.', '..'"),
        ("/home/dank/logs//a.log", "without '.', '..'"),
        ("/home/dank/logs/a.log/", "without '.', '..'"),
        ("home/dank/logs/a.log", "absolute path"),
        ("-oProxyCommand=touch /tmp/x", "may not start with '-'"),  # flag injection
        ("/home/dank/logs/a.log\ntouch /tmp/x", "control characters"),  # a second command line
        ("/home/dank/logs/a.log\x00x", "control characters"),
        ("/home/dank/logs/a\r.log", "control characters"),
        ("", "give the absolute path"),
        ("/home/dank/logs/" + "a" * 5000, "at most 4096"),
    ],
)
def test_remote_path_rules(path: str, problem: str | None) -> None:
    if problem is None:
        assert remote.check_remote_path(path, ROOTS, "dankserver") == path
    else:
        with pytest.raises(InputError, match=problem.replace("(", r"\(").replace(".", r"\.")):
            remote.check_remote_path(path, ROOTS, "dankserver")


def test_a_host_without_log_roots_reads_no_path() -> None:
    with pytest.raises(InputError, match=r"lists no log_roots.*\[hosts\.bare\]"):
        remote.check_remote_path("/home/dank/logs/a.log", (), "bare")


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("frank-archon", True),
        ("qwen38_bf16.fast", True),
        ("4e4d5749b01d", True),  # an ID
        ("-frank", False),  # flag injection: podman would read an option
        ("--latest", False),
        ("frank;touch x", False),
        ("frank archon", False),
        ("$(touch x)", False),
        ("frank\n", False),
        ("../frank", False),
        ("", False),
        ("a" * 129, False),
    ],
)
def test_container_rules(name: str, ok: bool) -> None:
    if ok:
        assert remote.check_container(name) == name
    else:
        with pytest.raises(InputError, match="container="):
            remote.check_container(name)


@pytest.mark.parametrize("boot", [0, 1_000_001, -1_000_001, True])
def test_boot_rules(boot: int) -> None:
    with pytest.raises(InputError, match="boot="):
        remote.check_boot(boot)


def _calls(command: str) -> list[list[str]]:
    calls = ("read_ledger_file ", "read_podman_logs ")
    return [shlex.split(line) for line in command.split("\n") if line.startswith(calls)]


@pytest.mark.parametrize("stat", ["1 2 3 4 5; touch pwned", "1 2 3 4", "\u0661 2 3 4 5", "1 2 3 4 5\n"])
def test_a_kept_stat_that_is_not_five_ascii_numbers_never_reaches_the_host(stat: str) -> None:
    """The stat a host sent back goes into the next command: only as the framing took it (digits), else '-'."""
    checkpoint = ReadMark("1234", 567, 89, 3, "I radiance boot: x", tail_offset=9000, tail_line=120,
                          tail_cksum="42 4096", stat=stat)
    command = build_command([LogRequest("file", "/var/log/a.log", -1, "h:p", ROOTS)], nonce=NONCE,
                            checkpoints=[checkpoint], timeout_s=60)
    (call,) = [c for c in _calls(command) if c[0] == "read_ledger_file"]
    assert call[13] == "-"
    assert not [line for line in command.split("\n") if line.startswith("want_stat ")]  # no stat asked for
    assert "pwned" not in command


def test_each_argument_is_one_quoted_word() -> None:
    path = "/var/log/radiance/a b;c$(d)`e`'f\"g.log"
    marker = "2026-10-13T12:00:00Z I radiance boot: frank '$(touch x)' `y` \"z\" \x1b[0m\r"
    checkpoint = ReadMark("1234", 567, 89, 3, marker, tail_offset=9000, tail_line=120, tail_cksum="42 4096",
                          stat="2049 1234 9000 1796226891 1796226892")
    command = build_command(
        [LogRequest("file", path, -2, "h:p", ROOTS), LogRequest("podman", "frank-archon", 1, "h:c")],
        nonce=NONCE, checkpoints=[checkpoint, None], timeout_s=60,
    )
    assert _calls(command) == [
        ["read_ledger_file", "0", "-2", path, "1234", "567", "89", "3", str(len(marker.encode())), "9000", "120",
         "42 4096", "-", "2049 1234 9000 1796226891 1796226892", *ROOTS],
        ["read_podman_logs", "1", "1", "frank-archon"],
    ]
    (anchor,) = [line for line in command.split("\n") if line.startswith("anchor_text=")]
    assert shlex.split(anchor) == [f"anchor_text={marker}"]
    # One compound command read whole before it runs, with nothing left on stdin for its tools.
    assert command.startswith("{\n") and command.endswith("\ncontrol_line Z\n} < /dev/null\n")
    assert remote.REMOTE_COMMAND == "exec /bin/sh -s"  # all the login shell ever parses


def test_keywords_come_from_the_phrase_table() -> None:
    command = build_command([LogRequest("file", "/home/dank/logs/a.log", -1, "x", ROOTS)], nonce=NONCE,
                            checkpoints=[None], timeout_s=5)
    grep_line = next(line for line in command.splitlines() if line.startswith("phrase_lines()"))
    words = shlex.split(grep_line.removeprefix("phrase_lines() {").removesuffix("; }"))
    patterns = [words[i + 1] for i, word in enumerate(words) if word == "-e"]
    assert patterns == list(KEYWORDS)
    assert f"marker={shlex.quote(BOOT_MARKER)}" in command


def test_the_command_is_the_template_plus_call_lines() -> None:
    """Only the call lines differ between two reads: nothing else is built from input."""
    one = build_command([LogRequest("file", "/home/dank/logs/a.log", -1, "x", ROOTS)], nonce=NONCE,
                        checkpoints=[None], timeout_s=5)
    two = build_command([LogRequest("podman", "other", 3, "y")], nonce="f" * 32, checkpoints=[None], timeout_s=5)
    head_one = one[: one.index("nonce=")]
    head_two = two[: two.index("nonce=")]
    assert head_one == head_two


def test_a_bad_nonce_or_a_relative_root_is_refused() -> None:
    with pytest.raises(ValueError):
        build_command([], nonce="x; touch y", checkpoints=[], timeout_s=5)
    with pytest.raises(InputError):
        build_command([LogRequest("file", "/a/b.log", -1, "x", ("a",))], nonce=NONCE, checkpoints=[None],
                      timeout_s=5)


def test_output_lines_without_the_nonce_are_data_or_nothing() -> None:
    raw = (
        f"#{NONCE} S 0\n"
        "#feedfacefeedfacefeedfacefeedface B 0 1 1\n"  # a log line posing as a control line
        f"#{NONCE} B 0 2 3\n"
        "14:I   vram_kv              5.00 GiB\n"
        "not a numbered line\n"
        f"#{NONCE} K 0 1\n"
        f"#{NONCE} C 0 99 10 5 2 - I radiance boot: frank archon\n"
        f"#{NONCE} Z\n"
    ).encode()
    sections, finished = parse_output(raw, nonce=NONCE, count=1)
    assert finished
    (section,) = sections
    assert (section.index, section.boots_seen, section.skipped) == (2, 3, 1)
    assert [(line.number, line.text) for line in section.lines] == [(14, "I   vram_kv              5.00 GiB")]
    assert section.checkpoint == ReadMark("99", 10, 5, 2, "I radiance boot: frank archon")
    counted_from = raw.replace(b" 2 - I radiance", b" 2 4096 I radiance")
    assert parse_output(counted_from, nonce=NONCE, count=1)[0][0].checkpoint == ReadMark(
        "99", 10, 5, 2, "I radiance boot: frank archon", base=4096)


@pytest.mark.parametrize("fields", ["99;touch 10 5 2 - I radiance boot: x", "99 $(x) 5 2 - I radiance boot: x",
                                    "99 10 5 2 - not a marker line", "a 1 1 1 - I radiance boot: x", "99 10 5 2",
                                    "99 10 5 2 $(x) I radiance boot: x", "99 10 5 2 -1 I radiance boot: x",
                                    "99 10 5 2 I radiance boot: x"])
def test_a_host_cannot_inject_through_the_resume_point(fields: str) -> None:
    raw = f"#{NONCE} S 0\n#{NONCE} C 0 {fields}\n#{NONCE} Z\n".encode()
    sections, _ = parse_output(raw, nonce=NONCE, count=1)
    assert sections[0].checkpoint is None


def test_known_hosts_never_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ssh config's 'UserKnownHostsFile none' is not honoured: the default file is used."""
    monkeypatch.setenv("HOME", str(tmp_path))
    target = remote.SSHTarget(name="h", address="h")
    default = str(tmp_path / ".ssh" / "known_hosts")
    assert remote.known_hosts_files(target, None) == [default]
    assert remote.known_hosts_files(target, ["none"]) == [default]
    assert remote.known_hosts_files(target, ["/dev/null"]) == [default]
    own = tmp_path / "kh"
    own.write_text("")
    assert remote.known_hosts_files(target, [str(own)]) == [str(own)]
    assert remote.known_hosts_files(remote.SSHTarget(name="h", address="h", known_hosts="/x/kh"), None) == ["/x/kh"]


def test_no_code_turns_host_key_checking_off() -> None:
    """Outside the tests, nothing passes known_hosts=None (asyncssh's 'do not verify')."""
    remote_package = Path(remote.__file__).parent
    for source in remote_package.parent.rglob("*.py"):
        text = source.read_text()
        assert "known_hosts=None" not in text.replace(" ", ""), source
        assert "import asyncssh" not in text or source.parent == remote_package, \
            f"asyncssh used outside the remote package: {source}"


def test_every_host_program_ships_with_the_package() -> None:
    """A non-editable install has each file of remote/programs: pyproject's package data names it."""
    package = Path(radiance_mcp.__file__).parent
    pyproject = tomllib.loads((package.parent / "pyproject.toml").read_text())
    shipped = pyproject["tool"]["setuptools"]["package-data"]["radiance_mcp"]
    programs = sorted((Path(remote.__file__).parent / "programs").iterdir())
    assert {p.suffix for p in programs} == {".sh", ".awk"}
    for program in programs:
        assert any(fnmatch(program.relative_to(package).as_posix(), glob) for glob in shipped), program


@pytest.mark.slow
def test_the_server_starts_without_loading_asyncssh() -> None:
    """asyncssh loads on the first remote read: neither the server nor the remote package imports it."""
    code = (
        "import sys\n"
        "from radiance_mcp.sources.config import Fleet\n"
        "from radiance_mcp.app.server import build_server\n"
        "from radiance_mcp.sources.runtime import Runtime\n"
        "build_server(Runtime(Fleet()))\n"
        "import radiance_mcp.sources.remote\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'asyncssh'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout


# ---------------------------------------------------------------------------------------
# The audit's templates: a script and its env file read, two modes' dry runs.


def _call_words(command: str, name: str) -> list[list[str]]:
    return [shlex.split(line) for line in command.split("\n") if line.startswith(f"{name} ")]


def test_the_file_read_quotes_every_argument() -> None:
    path = "/home/dank/scripts/a b;c$(d)`e`'f\"g.sh"
    command = remote.build_files_command(
        [remote.FileRequest(path, ("/home/dank/scripts",), "script"),
         remote.FileRequest("/home/dank/scripts/a.env", ("/home/dank/scripts",), "env_file", optional=True)],
        nonce=NONCE, cap_bytes=1 << 20)
    assert _call_words(command, "send_file") == [
        ["send_file", "0", "1048576", path, "/home/dank/scripts"],
        ["send_file", "1", "1048576", "/home/dank/scripts/a.env", "/home/dank/scripts"],
    ]
    assert command.startswith("{\n") and command.endswith("\ncontrol_line Z\n} < /dev/null\n")
    assert "\n# " not in command  # comments stay in this file


def test_the_dry_run_quotes_checks_and_limits() -> None:
    script = "/home/dank/scripts/frank archon;x.sh"
    command = remote.build_dry_run_command(script, "4242 977", ["fp8", "bf16-fixed"], ("/home/dank/scripts",),
                                           nonce=NONCE, timeout_s=19.5, cap_bytes=262_144)
    assert _call_words(command, "dry_run") == [
        ["dry_run", "0", script, "4242 977", "fp8", "/home/dank/scripts"],
        ["dry_run", "1", script, "4242 977", "bf16-fixed", "/home/dank/scripts"],
    ]
    # Killed on the host at the limit, rounded up to whole seconds: 19.5 -> 20.
    assert "time_limit='timeout -s KILL 20'" in command and "output_cap=262144" in command
    assert command.startswith("{\n") and command.endswith("\ncontrol_line Z\n} < /dev/null\n")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"modes": ["fp8", "--help"]}, "is not a mode name"),
        ({"modes": ["fp8", "fp8\n"]}, "is not a mode name"),
        ({"modes": ["fp8", "a;b"]}, "is not a mode name"),
        ({"cksum": "1 2; touch x"}, "cksum="),
        ({"cksum": "$(x) 2"}, "cksum="),
        ({"timeout_s": 0}, "timeout_s="),
        ({"timeout_s": float("nan")}, "timeout_s="),
        ({"script": "scripts/a.sh"}, "absolute"),
        ({"script": "/a/b.sh\ntouch x"}, "control characters"),
    ],
)
def test_the_dry_run_refuses_what_it_cannot_quote_safely(change: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"script": "/a/b.sh", "cksum": "1 2", "modes": ["fp8", "bf16"], "timeout_s": 20}
    arguments.update(change)
    with pytest.raises(InputError, match=message):
        remote.build_dry_run_command(
            arguments["script"], arguments["cksum"], arguments["modes"], ("/a",),  # type: ignore[arg-type]
            nonce=NONCE, timeout_s=arguments["timeout_s"], cap_bytes=1024)  # type: ignore[arg-type]


def test_data_blocks_end_only_at_their_own_nonce() -> None:
    other = "feedfacefeedfacefeedfacefeedface"
    data = f"a\n#{other} Y 0\n#{other} Z\n\n".encode()  # bytes posing as control lines: data
    raw = (f"#{NONCE} S 0\n#{NONCE} D 0 4242 {len(data)}\n".encode() + data + f"\n#{NONCE} Y 0\n".encode()
           + f"#{NONCE} S 1\n#{NONCE} D 1 1 0\n\n#{NONCE} Y 1\n#{NONCE} Z\n".encode())
    frames, finished = remote.parse_frames(raw, nonce=NONCE, count=2)
    assert finished
    assert frames[0].blocks["D"] == data and frames[0].fields["D"] == ["4242", str(len(data))]
    assert frames[1].blocks["D"] == b""  # an empty file
    cut, finished = remote.parse_frames(raw[: raw.index(b"Y 0")], nonce=NONCE, count=2)
    assert not finished and "D" not in cut[0].blocks
