"""The pool the remote tests share; the SSH servers they run against are in tests/ssh_hosts.py."""

from __future__ import annotations

from typing import Any

import pytest

from radiance_mcp.remote import Limits, SSHPool


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
