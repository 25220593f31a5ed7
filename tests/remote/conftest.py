"""The pool the remote tests share; the SSH servers they run against are in tests/support/ssh_hosts.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import remote_hosts

from radiance_mcp.sources.remote import Limits, SSHPool


@pytest.fixture(scope="session", autouse=True)
def shared_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Under pytest-xdist, the workers of one run share the local reader's answers (remote_hosts.local_boot).

    A worker's temporary directory is <the run's>/popen-gwN: the run's own is the workers' common
    parent, new each run, so no answer outlives the code that gave it.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        remote_hosts.SHARED_ORACLE = tmp_path_factory.getbasetemp().parent / "remote-oracle"
        remote_hosts.SHARED_ORACLE.mkdir(exist_ok=True)
    yield
    remote_hosts.SHARED_ORACLE = None


@pytest.fixture
async def pool() -> Any:
    """A fresh pool per test, with short limits; closed at the end.

    Small files are not cut in one pass here (small_file_bytes=0), so these small test logs go
    through the checkpoints, the reads from the end and the resumed reads; test_read_from_end.py
    runs the one-pass read under the default limits against the same oracle.
    """
    ssh = SSHPool(Limits(connect_timeout_s=10, command_timeout_s=30, small_file_bytes=0))
    yield ssh
    await ssh.close()
