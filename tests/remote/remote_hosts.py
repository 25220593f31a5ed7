"""Data for the remote tests: ledgers of several boots and the injection corpus.

(A module of its own, not conftest.py, so the tests can import it by name. The loopback host
itself, LoopbackHost and its servers, is in tests/support/ssh_hosts.py.)
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from pathlib import Path

from ssh_hosts import LoopbackHost

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.ledger import read_text

# An older boot than the example's: a 28,096 MiB pair (24,000 + 4,096) settled at 2.51 GiB free,
# so its ceiling is (2,570.24 - 209.19) + 28,096 = 30,457 MiB, against the example's 30,969.
OLD_PAIR_MIB = 28_096
OLD_CEILING_MIB = 30_457
FILLER = "2026-10-13T12:00:00Z I req {n:05d} POST /v1/completions 200 prompt 1834 tok, decode 98.4 t/s\n"


def older_boot(example: str) -> str:
    text = re.sub(r"(--vram-kv-mib\s+)5120", r"\g<1>4096", example)
    text = re.sub(r"(vram_kv\s+)5\.00 GiB", r"\g<1>4.00 GiB", text)
    return text.replace("settled at 2.01 GiB", "settled at 2.51 GiB")


def ledger(example: str, boots: int = 3, filler: int = 5) -> str:
    """boots-1 older boots then the example (newest), each followed by request lines."""
    parts = []
    for number in range(boots):
        parts.append(example if number == boots - 1 else older_boot(example))
        parts.extend(FILLER.format(n=number * 1000 + i) for i in range(filler))
    return "".join(parts)


_LOCAL_BOOTS: dict[tuple[str, int], Boot] = {}
SHARED_ORACLE: Path | None = None
"""A directory the pytest-xdist workers of one run share the oracle's answers in (tests/remote/conftest.py
sets it under the run's own temporary directory); None: this process keeps its own."""


def local_boot(text: str, boot: int = -1) -> Boot:
    """The oracle: the local reader's boot of the text (ledger.read_text), kept for the next reader.

    The big-file tests ask it for the same text and boot once per pool and per SSH server (and
    the servers' twins of a test may run in two workers); on 13 MiB of text one local read costs
    seconds. Kept by the text's digest, not the text, so every answer of the run stays (a few KiB
    each) without holding its megabytes of text. Its source is a placeholder: the tests compare
    the index, boots seen, line range and hits, not the source's name.
    """
    digest = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    if (digest, boot) not in _LOCAL_BOOTS:
        shared = SHARED_ORACLE / f"{digest}{boot:+d}.pickle" if SHARED_ORACLE else None
        if shared is not None and shared.exists():
            answer = pickle.loads(shared.read_bytes())
        else:
            answer = read_text(text, source="local", boot=boot)
            if shared is not None:  # whole or not at all: another worker may look at the same moment
                partial = shared.with_name(f"{shared.name}.{os.getpid()}")
                partial.write_bytes(pickle.dumps(answer))
                partial.replace(shared)
        _LOCAL_BOOTS[(digest, boot)] = answer
    return _LOCAL_BOOTS[(digest, boot)]


# {pwned} is a file the payload would create, {canary} one it would delete.
INJECTIONS = [
    "; touch {pwned}",
    "$(touch {pwned})",
    "`touch {pwned}`",
    "\ntouch {pwned}",
    "x\x00; touch {pwned}",
    "-oProxyCommand=touch {pwned}",
    "--help",
    "../../../../../../../..{canary}",
    "..",
    "'; touch {pwned}; '",
    '"; touch {pwned}; "',
    "\\'; touch {pwned}; echo \\'",
    "| touch {pwned}",
    "&& rm -f {canary}",
    "$IFS;rm${{IFS}}-f${{IFS}}{canary}",
    "*",
    "~root",
    "a b",
]


def payloads(host: LoopbackHost) -> list[str]:
    """The corpus with the host's own pwned and canary paths filled in."""
    return [p.format(pwned=host.pwned, canary=host.canary) for p in INJECTIONS]
