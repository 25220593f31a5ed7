"""`radiance-mcp demo | head -1`: the reader leaves after one line; the demo stops quietly.

A real process with a real pipe: only a process shows what its stderr and exit status are
when the reader of its stdout is gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_the_demo_piped_into_head_stops_without_a_traceback_and_leaves_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    with subprocess.Popen([sys.executable, "-m", "radiance_mcp", "demo"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()  # as head does after its line
        stderr = process.stderr.read().decode()
        status = process.wait(timeout=120)
    assert first.startswith(b"radiance-mcp demo")
    assert stderr == "" and status == 141  # 128 + SIGPIPE, as a shell tool killed by the pipe
    assert list(tmp_path.iterdir()) == []  # the simulated fleet's directory is removed
