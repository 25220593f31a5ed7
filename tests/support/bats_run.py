"""Real bats on rendered gates: the tests that run the bats file render_gates writes (they spawn bats)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

BATS = shutil.which("bats")
needs_bats = pytest.mark.skipif(BATS is None, reason="bats (Debian: bats) is not installed; .ci/run installs it")


def run_bats(bats: Path, env: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`bats --tap BATS` (ENV_FILE=env when given) in cwd, with a bare PATH; bounded by a timeout."""
    assert BATS is not None
    extra = {"ENV_FILE": str(env)} if env else {}
    return subprocess.run([BATS, "--tap", str(bats)], capture_output=True, text=True, check=False, cwd=cwd,
                          env={"PATH": "/usr/bin:/bin", **extra}, timeout=120)
