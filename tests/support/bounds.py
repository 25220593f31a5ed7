"""Bounds on waits: each catches a hang, none asserts a speed.

CI runs beside other work (load average 11 on 2 cores has been seen), where a Python process can take
many seconds to start, import and exit. A wait for a process or server is therefore bounded by HANG_S:
far past any healthy run on a loaded machine, and still a failure, never a suite that hangs for ever.
"""

import time
from collections.abc import Iterator

HANG_S = 300.0
"""How long a test waits for a process to start, answer or exit before it calls it hung."""


def until_hung() -> Iterator[None]:
    """The rounds of a polling loop, for HANG_S seconds: ``for _ in until_hung(): ...; time.sleep(0.05)``
    (a count of rounds would be a bound in time that a loaded machine's slow rounds stretch or cut)."""
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        yield
