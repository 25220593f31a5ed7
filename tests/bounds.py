"""Bounds on waits: each catches a hang, none asserts a speed.

CI runs beside other work (load average 11 on 2 cores has been seen), where a Python process can take
many seconds to start, import and exit. A wait for a process or server is therefore bounded by HANG_S:
far past any healthy run on a loaded machine, and still a failure, never a suite that hangs for ever.
"""

HANG_S = 300.0
"""How long a test waits for a process to start, answer or exit before it calls it hung."""
