"""The CLI run in this process, as a person's shell runs it: ``radiance_mcp.app.cli.main(argv)``.

A spawned ``radiance-mcp`` costs about a second of CPU, mostly importing the SDK and pydantic;
main() in the test's process costs what the command itself does. tests/conftest.py imports the
``cli`` fixture, so any test can take it:

    ran = cli("compute-ceiling", "--log", path, cwd=tmp_path, env={"PATH": ...})
    assert ran.returncode == 1 and "..." in ran.stderr

What a process would show is kept: the exit status as main() returns it (argparse's usage
errors exit 2 through SystemExit, taken as the status), stdout and stderr as the file
descriptors received them (capfd: print() and anything a child process writes), the working
directory and environment of the call (restored after it), stdin when given, and a deadline:
a hang fails the test instead of blocking it. An exception that a process would print as a
traceback fails the test with that traceback. Afterwards the SIGTERM handler is restored
(--demo installs one), and the call must have left no thread running (but offload.py's pool
for blocking reads, kept for the process) and no ``radiance-demo-*`` directory in the
temporary directory: the demo fleet cleaned up after itself.

Tests that need what only a process shows keep spawning one: the console script entry point,
the stdio and HTTP transports, SIGTERM, a port in use, what a fresh interpreter imports, a
terminal, logging as a fresh process configures it.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from radiance_mcp.app import cli as cli_module


@dataclass(frozen=True)
class Ran:
    """What a shell would see of one command: its exit status and its two output streams."""

    returncode: int
    stdout: str
    stderr: str


CliRunner = Callable[..., Ran]
DEADLINE_S = 60
"""A command that hangs (a FIFO opened, a server that serves) fails the test after this long,
unless the call gives its own deadline_s."""


class _Deadline:
    """SIGALRM after seconds: the command is interrupted where it blocks, and the test fails."""

    def __init__(self, seconds: float, argv: tuple[object, ...]) -> None:
        def expired(signum: int, frame: object) -> None:
            raise TimeoutError(f"radiance-mcp {argv} still ran after {seconds} s")

        self._previous = signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def cancel(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous)


@pytest.fixture
def cli(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
        ) -> CliRunner:
    """``cli(*argv, cwd=None, env=None, stdin=None, deadline_s=60)``: radiance-mcp's main() here, as a Ran."""
    temp = tmp_path_factory.mktemp("cli-tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where --demo puts its fleet: checked below

    def run(*argv: str | os.PathLike[str], cwd: Path | None = None, env: Mapping[str, str] | None = None,
            stdin: str | None = None, deadline_s: float = DEADLINE_S) -> Ran:
        capfd.readouterr()  # what the test printed before is not the command's
        with monkeypatch.context() as scoped:
            if cwd is not None:
                scoped.chdir(cwd)
            for name, value in (env or {}).items():
                scoped.setenv(name, value)
            if stdin is not None:
                scoped.setattr(sys, "stdin", io.StringIO(stdin))
            handler = signal.getsignal(signal.SIGTERM)
            threads = set(threading.enumerate())
            deadline = _Deadline(deadline_s, argv)
            try:
                code = cli_module.main([os.fspath(a) for a in argv])
            except SystemExit as exc:  # argparse's usage errors: exit 2, as in a process
                code = exc.code if isinstance(exc.code, int) else 1
            finally:
                deadline.cancel()
                signal.signal(signal.SIGTERM, handler)
        out, err = capfd.readouterr()
        # radiance-work-*: offload.py's pool for blocking reads, made once and kept for the process.
        left = [t.name for t in set(threading.enumerate()) - threads
                if t.is_alive() and not t.name.startswith("radiance-work")]
        assert not left, f"radiance-mcp {argv} left threads running: {left}"
        assert not list(temp.glob("radiance-demo-*")), f"radiance-mcp {argv} left its demo directory"
        return Ran(code, out, err)

    return run
