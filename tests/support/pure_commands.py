"""The tool commands that read only given text and files on this machine, and the files they read.

tests/test_cli_imports.py runs each in a fresh interpreter (what it imports), tests/test_cli_loopless.py
in this process with and without an event loop (the same output). None of them names a host, a
service on one, an endpoint or a mode to run: each runs with no event loop (cli._needs_loop).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

BootBuilder = Callable[..., str]

# A two-card boot of another service, a wider window and a smaller pool than the example's.
FLAGS = {"max-model-len": "131072", "max-num-seqs": "3", "max-num-batched-tokens": "2048", "host-pool-mib": "7580",
         "tp": "2", "kv-cache-dtype": "fp8", "placement": "slab", "vram-weights-mib": "24000",
         "vram-kv-mib": "4096", "gpu-headroom-mib": "96"}
CARD = {"total": "31.86 GiB", "weights": "23.44 GiB", "kv": "4.00 GiB", "unclaimed": "1.42 GiB",
        "budgets": "27.44 GiB", "unaccounted": "4.42 GiB", "free": "3.01 GiB", "floor": "209.19 MiB",
        "headroom": "96.00 MiB", "static": "113.19 MiB"}
SCRIPT = """\
#!/bin/sh
. /srv/lab/inference.env
case "$1" in
  narrow) exec radiance --max-num-seqs "$LAB_SEATS" --max-num-batched-tokens "$LAB_STEP" ;;
  wide)   exec radiance --max-num-seqs "$LAB_SEATS" --max-num-batched-tokens 8192 ;;
esac
"""

PURE: list[tuple[tuple[str, ...], int | None]] = [
    (("read-budget-table", "--log", "gpu-box.log"), 0),
    (("compute-ceiling", "--log-text-file", "gpu-box.log", "--json"), 0),
    # 3 x 131,072 x 7,488 B = 2,808 MiB + 220 + 448 = 3,476 MiB > 1,024: the check runs and fails
    (("check-pool-contract", "--seqs", "3", "--max-model-len", "131072", "--kv-cache-dtype", "fp8",
      "--pool-mib", "1024"), 3),
    (("audit-step-shape", "--log", "two.log", "--proven-boot", "1", "--candidate-boot", "2"), None),
    (("check-serve-script", "--script-text-file", "serve.sh", "--env-text-file", "inference.env"), None),
    (("compare-dry-run", "--proven-argv", "radiance\n--max-num-batched-tokens\n2048\n",
      "--candidate-argv", "radiance\n--max-num-batched-tokens\n8192\n"), 3),
    (("plan-free-vram", "--log", "gpu-box.log"), 0),
    (("render-gates", "--log", "gpu-box.log", "--vram-kv-mib", "4608", "--env-prefix", "LAB"), None),
    (("compare-arms", "--arms", '[{"value": 2048, "rate": 41.5}, {"value": 4096, "rate": 41.9}]'), 0),
    (("list-fleet",), 0),
]
"""(argv, exit status; None: whatever the verdict) run in the directory write_files fills."""


def case_id(value: object) -> str | None:
    return value[0] if isinstance(value, tuple) and isinstance(value[0], str) else None


def write_files(directory: Path, boot_text: BootBuilder) -> Path:
    """The files the PURE commands name, relative to directory."""
    (directory / "gpu-box.log").write_text(boot_text(name="gpu-box", flags=FLAGS, cards=[CARD, CARD]))
    (directory / "two.log").write_text(boot_text(name="gpu-box") + boot_text(name="gpu-box", flags=FLAGS))
    (directory / "serve.sh").write_text(SCRIPT)
    (directory / "inference.env").write_text("LAB_SEATS=3\nLAB_STEP=2048\n")
    return directory
