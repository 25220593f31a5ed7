"""Shared fixtures: the example ledger, and a builder for ledger variants written with ledger.render().

Keep this file small; add fixtures with str_replace (others edit it too).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

# httpcore tries `import sniffio` on every async request to learn the event loop, and takes
# asyncio when it is absent. A failed import is not remembered, so each try searches sys.path
# again, through pytest's import hook here: a fifth of an HTTP-heavy test's time (2,000 requests:
# 28,000 searches, 21 s of 108 under cProfile). A None entry makes the failed import immediate,
# with the same outcome (asyncio). Where sniffio is installed nothing changes.
if importlib.util.find_spec("sniffio") is None:
    sys.modules["sniffio"] = None  # type: ignore[assignment]

# The tests' helpers (the CLI in-process, MCP calls, servers, SSH hosts, the real engine) live in
# tests/support/, imported by their module names.
sys.path.insert(0, str(Path(__file__).parent / "support"))

# radiance-mcp's CLI run in the test's process (main(argv), exit status and output as a shell
# sees them): see tests/support/cli_run.py.
from cli_run import cli  # noqa: F401

# The real engine (llama-cpp-python's server), one per session (per pytest-xdist worker) for the
# probe and engine-ledger tests.
from llama_server import llama_server  # noqa: F401

# Real SSH servers on loopback (asyncssh's and OpenSSH's sshd), one of each per session (per
# pytest-xdist worker) for every directory whose tests reach a host: see tests/support/ssh_hosts.py.
from ssh_hosts import asyncssh_host, ssh_host, sshd_host  # noqa: F401

from radiance_mcp.core.ledger import render
from radiance_mcp.sources.config import EXAMPLES_DIR

EXAMPLE_LOG = EXAMPLES_DIR / "frank-archon.log"

WORKERS_PER_CPU = 2
"""`pytest -n auto` starts this many pytest-xdist workers per CPU: the tests spend much of their
time waiting (SSH logins and commands, servers and processes they start, a simulator's requests),
which a second worker per CPU fills. On 2 cores the quick suite took 93-101 s with 2 workers and
82-84 s with 4, the same 1,980 tests passing (2026-12-01)."""


def pytest_configure(config: pytest.Config) -> None:
    """Every process a test starts keeps its files in this run's own cache directory (XDG_CACHE_HOME), never the
    user's: another checkout's CI or a developer's server may be writing ~/.cache/radiance-mcp at the same time;
    and no test's output depends on the terminal's width (COLUMNS)."""
    own = tempfile.mkdtemp(prefix="radiance-mcp-tests-cache-")  # one per pytest process: each xdist worker's own
    os.environ["XDG_CACHE_HOME"] = own
    config.add_cleanup(lambda: shutil.rmtree(own, ignore_errors=True))
    # The CLI's tables fit COLUMNS when it is set (app/tables.py), and pytest-xdist's workers set it to 80: the
    # tests read them at the default 120 columns wherever they run, unless a test sets COLUMNS itself.
    os.environ.pop("COLUMNS", None)


SLOW_MARKERS = frozenset({"real_engine", "sshd", "inspector"})
"""Markers of tests that need a process of their own: each is also `slow`."""
SLOW_FIXTURES = frozenset({"ssh_host", "asyncssh_host", "sshd_host", "llama_server",
                           "stdio_answers", "http_url", "stdio", "http_server", "server_url"})
"""Fixtures that start a server (an SSH host, the real engine, `radiance-mcp serve` over stdio or HTTP): a test
that uses one is `slow`."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`slow` for what needs a process or a server, beside the tests marked so by hand (pyproject's markers)."""
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))
        if SLOW_MARKERS & {mark.name for mark in item.iter_markers()} or SLOW_FIXTURES & uses:
            item.add_marker(pytest.mark.slow)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """pytest-xdist's hook for `-n auto`: WORKERS_PER_CPU per CPU this process may run on."""
    return WORKERS_PER_CPU * len(os.sched_getaffinity(0))

# The example boot's echoed flags (PHRASEBOOK section 8): the pair is 24,000 + 5,120 = 29,120 MiB.
EXAMPLE_FLAGS: dict[str, str] = {
    "max-model-len": "200000",
    "max-num-seqs": "2",
    "max-num-batched-tokens": "1024",
    "host-pool-mib": "7580",
    "tp": "1",
    "kv-cache-dtype": "fp8",
    "placement": "slab",
    "vram-weights-mib": "24000",
    "vram-kv-mib": "5120",
    "gpu-headroom-mib": "96",
}
# One card's table and settled line as the example prints them.
EXAMPLE_CARD: dict[str, str] = {
    "total": "31.86 GiB",
    "weights": "23.44 GiB",
    "kv": "5.00 GiB",
    "unclaimed": "477.30 MiB",
    "budgets": "28.44 GiB",
    "unaccounted": "3.42 GiB",
    "free": "2.01 GiB",
    "floor": "209.19 MiB",
    "headroom": "96.00 MiB",
    "static": "113.19 MiB",
}

BootBuilder = Callable[..., str]


def build_boot(
    *,
    name: str = "frank-archon",
    flags: Mapping[str, str] = EXAMPLE_FLAGS,
    cards: Sequence[Mapping[str, str]] = (EXAMPLE_CARD,),
    filler: Sequence[str] = (),
) -> str:
    """One boot in the example's layout, every phrase written by ledger.render(); ends with a newline."""
    lines = [render("boot_start", name=name)]
    lines += [render("flag", flag=flag, value=value) for flag, value in flags.items()]
    lines += [render("activation_arena", size="504.00 MiB", mnbt=1024), render("claimable", size="30.87 GiB")]
    for number, card in enumerate(cards):
        lines += [
            render("budget_header", card=number),
            render("card_total", size=card["total"]),
            render("vram_weights", size=card["weights"]),
            render("vram_kv", size=card["kv"]),
            render("unclaimed", size=card["unclaimed"]),
            render("budgets_total", budgets=card["budgets"], total=card["total"], unaccounted=card["unaccounted"]),
        ]
    lines += [
        render("weights_by_tier", vram="23.44 GiB", host="10.21 GiB", disk="0 B"),
        render("slab_slots", slots=17548, host=7580),
        render("ledger_mover", slots=1300, size="1.75 GiB"),
        render("kv_backing", level="I", size="5.00 GiB", dtype="fp8", rate=7488, percent=100, seqs=2,
               tokens=200000, sessions="3.0"),
        render("backs", seqs=2, tokens=200000),
        render("sampler", seqs=2, spec=3, rows=8),
    ]
    lines += [render("settled", card=number, **{k: card[k] for k in ("free", "floor", "headroom", "static")})
              for number, card in enumerate(cards)]
    lines += [*filler, render("serving", address="0.0.0.0:8000")]
    return "\n".join(lines) + "\n"


@pytest.fixture
def example_text() -> str:
    return EXAMPLE_LOG.read_text(encoding="utf-8")


@pytest.fixture
def example_path() -> Path:
    return EXAMPLE_LOG


@pytest.fixture
def boot_text() -> BootBuilder:
    """build_boot as a fixture, so test modules need not import conftest."""
    return build_boot


# ---------------------------------------------------------------------------------------
# Hand-written boots for the step-shape audit (tests/step_shape, tests/tools), every phrase
# written by ledger.render(). The seed's pair at one window (8 x 32,768, fp8): MNBT 1,024 boots
# (arena 504 MiB, claimable 30.87 GiB); MNBT 65,536 refuses (arena 10.65 GiB, claimable
# 16.85 GiB, experts squeezed to 10.98 GiB, 56 GiB of weights on the disk tier, kv cache
# 271.25 MiB: 0.0 full-length sessions).

SHAPE_FLAGS: dict[str, str] = {**EXAMPLE_FLAGS, "max-model-len": "32768", "max-num-seqs": "8"}
"""The audit's proven shape: the example boot's flags at a 32,768-token window and 8 seats."""


def proven_boot(flags: Mapping[str, str] = SHAPE_FLAGS, name: str = "qwen38-bf16") -> str:
    """MNBT 1,024: boots, the KV cache backs all 8 seats at 32,768."""
    lines = [render("boot_start", name=name)]
    lines += [render("flag", flag=f, value=v) for f, v in flags.items()]
    lines += [
        render("activation_arena", size="504.00 MiB", mnbt=flags["max-num-batched-tokens"]),
        render("claimable", size="30.87 GiB"),
        render("budget_header", card=0),
        render("card_total", size="31.86 GiB"),
        render("vram_weights", size="23.44 GiB"),
        render("vram_kv", size="5.00 GiB"),
        render("unclaimed", size="477.30 MiB"),
        render("weights_by_tier", vram="23.44 GiB", host="10.21 GiB", disk="0 B"),
        render("slab_slots", slots=17548, host=7580),
        render("ledger_mover", slots=1300, size="1.75 GiB"),
        render("expert_prefetch", size="1.75 GiB", lender=", lender: the KV cache"),
        render("kv_backing", level="I", size="5.00 GiB", dtype="fp8", rate=7488, percent=100, seqs=8,
               tokens=32768, sessions="13.5"),
        render("backs", seqs=8, tokens=32768),
        render("settled", card=0, free="2.01 GiB", floor="209.19 MiB", headroom="96.00 MiB", static="113.19 MiB"),
        render("serving", address="0.0.0.0:8000"),
    ]
    return "\n".join(lines) + "\n"


def refused_boot(mnbt: str = "65536", name: str = "qwen38-bf16") -> str:
    """MNBT 65,536 at the same window: the arena leaves 271.25 MiB of KV cache; startup stops."""
    flags = {**SHAPE_FLAGS, "max-num-batched-tokens": mnbt}
    lines = [render("boot_start", name=name)]
    lines += [render("flag", flag=f, value=v) for f, v in flags.items()]
    lines += [
        render("activation_arena", size="10.65 GiB", mnbt=mnbt),
        render("claimable", size="16.85 GiB"),
        render("weights_by_tier", vram="10.98 GiB", host="10.21 GiB", disk="56.00 GiB"),
        render("no_lender"),
        render("kv_backing", level="E", size="271.25 MiB", dtype="fp8", rate=7488, percent=0, seqs=8,
               tokens=32768, sessions="0.0"),
        render("fix_text", arena="10.65 GiB", kv="271.25 MiB"),
        render("startup_stopped", reason="out of memory"),
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def proven_text() -> str:
    return proven_boot()


@pytest.fixture
def refused_text() -> str:
    return refused_boot()
