"""Hand-written boots for the step-shape audit, every phrase written by ledger.render().

The seed's pair at one window (8 x 32,768, fp8): MNBT 1,024 boots (arena 504 MiB, claimable
30.87 GiB); MNBT 65,536 refuses (arena 10.65 GiB, claimable 16.85 GiB, experts squeezed to
10.98 GiB, 56 GiB of weights on the disk tier, kv cache 271.25 MiB: 0.0 full-length sessions).

A test here that reaches a host takes ssh_host (or asyncssh_host, sshd_host): the SSH servers on
loopback that tests/remote uses too, one of each per session (tests/ssh_hosts.py, imported by
tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from radiance_mcp.ledger import render

SHAPE_FLAGS: dict[str, str] = {
    "max-model-len": "32768",
    "max-num-seqs": "8",
    "max-num-batched-tokens": "1024",
    "host-pool-mib": "7580",
    "tp": "1",
    "kv-cache-dtype": "fp8",
    "placement": "slab",
    "vram-weights-mib": "24000",
    "vram-kv-mib": "5120",
    "gpu-headroom-mib": "96",
}


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
