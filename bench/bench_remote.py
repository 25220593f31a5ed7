"""Remote ledger reads over SSH against the seed's own approach, on a loopback OpenSSH sshd.

Targets (issues 3 and 15), on a 1 GiB log of 50 boots whose newest boot is the example ledger:
read_budget_table moves at most 64 KiB over SSH; its first read takes at most 1.25x the wall
time of the seed's approach (one `ssh host` call running a `grep -m1` per phrase, which returns
the OLDEST boot) and a warm read at most 0.1x, measured in the same run, beside a correct read
from the end over ssh (`tac | awk`); 32 services on ONE host entry read at once take at most 3x
one warm read, cold and warm, both when they name one file and when each has its own.

    seed   `ssh -p PORT root@127.0.0.1 '<grep -m1 per phrase>'`, a fresh ssh each time (as in
           the seed); its output parsed by the same reader, to show which boot it returns
    tac    `ssh ... 'tac LOG | awk <print phrase lines, stop after the boot marker> | tac'`, a
           fresh ssh each time: the newest boot, read from the end by hand
    cold   read_budget_table on a fresh Runtime: connect, verify, then the first read of the
           log (the host finds the newest boot marker searching back from the end; the 1 GiB
           before the boot is not counted, so its lines count from the marker's byte offset)
    warm   read_budget_table on a Runtime that has read the log before: pooled connection,
           the host checks the last read's boot marker and stopping place are unchanged and
           reads only the bytes added since
    bytes  both directions of one run of each, counted by a TCP relay between client and sshd
    32     at once: cold on a fresh Runtime (one cold read beside it, on another); warm, one
           read and the 32 alternating on the same Runtime, --repeat times each, after the cold

The sshd gets a throwaway host key, key-only root login, UsePAM no and SHLVL=1 in the
session environment (bash would otherwise source root's ~/.bashrc for every command; on the
development machine that is a pyenv init of about 0.2 s, paid by both sides alike). The log
is written under /tmp and deleted afterwards.

    .venv/bin/python bench/bench_remote.py [--repeat 7] [--size-mib 1024] [--boots 50] [--services 32]

Runs alternate; medians are compared.

Prints figures and ratios; asserts nothing. Needs root and /usr/sbin/sshd (openssh-server).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from radiance_mcp.core.ledger import KEYWORDS, PHRASES, read_text  # noqa: E402
from radiance_mcp.core.rules import capacity  # noqa: E402
from radiance_mcp.models import ReadBudgetTableInput  # noqa: E402
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet  # noqa: E402
from radiance_mcp.sources.runtime import Runtime  # noqa: E402
from radiance_mcp.tools.ledger import read_budget_table  # noqa: E402

EXAMPLE = (EXAMPLES_DIR / "frank-archon.log").read_text()
BUDGET_PHRASES = ("budget_header", "card_total", "vram_weights", "vram_kv", "unclaimed", "budgets_total", "settled")
BUDGET_FLAGS = ("--vram-weights-mib", "--vram-kv-mib", "--gpu-headroom-mib")
FILLER = "2026-10-13T12:{m:02d}:{s:02d}.{ms:03d}Z I req {n:07d} POST /v1/chat/completions 200 prompt {p} tok\n"

SSHD_CONFIG = """\
ListenAddress 127.0.0.1
Port {port}
HostKey {dir}/host_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
MaxStartups 200:30:400
MaxSessions 64
SetEnv SHLVL=1
"""


def older_boot(example: str) -> str:
    """The same boot with a 28,096 MiB pair (4,096 MiB of KV) settled at 2.51 GiB: not the newest."""
    text = re.sub(r"(--vram-kv-mib\s+)5120", r"\g<1>4096", example)
    text = re.sub(r"(vram_kv\s+)5\.00 GiB", r"\g<1>4.00 GiB", text)
    return text.replace("settled at 2.01 GiB", "settled at 2.51 GiB")


def write_log(path: Path, size_mib: int, boots: int) -> None:
    per_boot = size_mib * 1024 * 1024 // boots
    lines = []
    size = 0
    n = 0
    while size < per_boot:
        line = FILLER.format(m=n // 60 % 60, s=n % 60, ms=n % 1000, n=n, p=1000 + n * 7 % 90_000)
        lines.append(line)
        size += len(line)
        n += 1
    filler = "".join(lines)
    old = older_boot(EXAMPLE)
    with path.open("w") as out:
        for number in range(boots):
            out.write(EXAMPLE if number == boots - 1 else old)
            out.write(filler)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Sshd:
    def __init__(self, base: Path) -> None:
        self.base = base
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(base / name)],
                           check=True)
        shutil.copy(base / "client_key.pub", base / "authorized_keys")
        self.key_line = " ".join((base / "host_key.pub").read_text().split()[:2])
        self.port = free_port()
        (base / "sshd_config").write_text(SSHD_CONFIG.format(port=self.port, dir=base))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.log = (base / "sshd.log").open("wb")
        self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(base / "sshd_config")],
                                     stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit(f"sshd did not start: {(base / 'sshd.log').read_text()[-1000:]}") from None
                time.sleep(0.05)
        self.identity = base / "client_key"
        self.known_hosts = base / "known_hosts"
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {self.key_line}\n")

    def trust_port(self, port: int) -> None:
        with self.known_hosts.open("a") as out:
            out.write(f"[127.0.0.1]:{port} {self.key_line}\n")

    def host(self, port: int | None = None) -> dict[str, Any]:
        return {"address": "127.0.0.1", "port": port or self.port, "user": "root", "identity": str(self.identity),
                "known_hosts": str(self.known_hosts), "log_roots": [str(self.base)]}

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)
        self.log.close()


class Relay:
    """A TCP relay in front of sshd that counts the bytes each way (the bytes 'over SSH')."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.up = 0
        self.down = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, upward: bool) -> None:
            try:
                while chunk := await src.read(65536):
                    if upward:
                        self.up += len(chunk)
                    else:
                        self.down += len(chunk)
                    dst.write(chunk)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))

    def reset(self) -> None:
        self.up = self.down = 0

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def seed_script(log: Path) -> str:
    """The seed's own step: a grep -m1 per phrase (its flag loop verbatim, then each table phrase)."""
    flags = " ".join(f'"{flag}"' for flag in BUDGET_FLAGS)
    lines = [f"L={shlex.quote(str(log))}",
             f"for k in {flags}; do",
             '  grep -m1 -E "^I +\\\\${k%}" "$L" | head -1; done']
    lines += [f'grep -m1 {shlex.quote(PHRASES[key].keyword)} "$L"' for key in BUDGET_PHRASES]
    return "\n".join(lines) + "\n"


def tac_script(log: Path) -> str:
    """A correct read by hand, as issue 15 wrote it: the file backwards through one awk regex of the
    phrase keywords, up to the newest boot marker, then back in order."""
    special = set(".[]()*+?{}|^$\\/")
    pattern = "|".join("".join(f"[{c}]" if c in special else c for c in k) for k in KEYWORDS)
    program = f"/radiance boot/ {{ print; exit }} /{pattern}/ {{ print }}"
    return f"tac {shlex.quote(str(log))} | awk {shlex.quote(program)} | tac\n"


async def run_seed(sshd: Sshd, port: int, script: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "ssh", "-p", str(port), "-i", str(sshd.identity), "-o", f"UserKnownHostsFile={sshd.known_hosts}",
        "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "root@127.0.0.1", script,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"seed ssh failed: {err.decode()}")
    return out.decode()


async def timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await call()
    return time.perf_counter() - start, result


def fleet_for(sshd: Sshd, log: Path, hosts: dict[str, int]) -> Fleet:
    return Fleet.model_validate({
        "hosts": {name: sshd.host(port) for name, port in hosts.items()},
        "services": {f"svc-{name}": {"host": name, "log": str(log)} for name in hosts},
    })


async def close(runtime: Runtime) -> None:
    pool = runtime.ssh_pool
    if pool is not None:
        await pool.close()


@dataclass
class Bench:
    """What every stage shares: the options, the servers, the log and the seed's two scripts."""

    options: argparse.Namespace
    base: Path
    sshd: Sshd
    relay: Relay
    log: Path
    script: str
    tac: str
    args: ReadBudgetTableInput
    fleet: Fleet


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--boots", type=int, default=50)
    parser.add_argument("--services", type=int, default=32)
    options = parser.parse_args()
    if os.geteuid() != 0 or not os.access("/usr/sbin/sshd", os.X_OK):
        raise SystemExit("needs root and /usr/sbin/sshd (apt-get install -y openssh-server)")

    base = Path(tempfile.mkdtemp(prefix="bench-remote-", dir="/tmp"))
    sshd: Sshd | None = None
    relay: Relay | None = None
    try:
        log = base / "frank_archon.log"
        start = time.perf_counter()
        write_log(log, options.size_mib, options.boots)
        print(f"log: {log.stat().st_size / 2**20:,.0f} MiB, {options.boots} boots, written in "
              f"{time.perf_counter() - start:.1f} s; the newest boot is the example (pair 29,120 MiB)")
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
        sshd = Sshd(base)
        relay = Relay(sshd.port)
        await relay.start()
        sshd.trust_port(relay.port)
        bench = Bench(options, base, sshd, relay, log, seed_script(log), tac_script(log),
                      ReadBudgetTableInput.model_validate({"service": "svc-bench"}),
                      fleet_for(sshd, log, {"bench": sshd.port}))
        warm_runtime = Runtime(bench.fleet)
        await which_boot(bench, warm_runtime)
        await bytes_over_ssh(bench, warm_runtime)
        await wall_time(bench, warm_runtime)
        await close(warm_runtime)
        await fan_out(bench)
    finally:
        if relay is not None:
            relay.close()
        if sshd is not None:
            sshd.stop()
        shutil.rmtree(base, ignore_errors=True)


async def which_boot(b: Bench, warm_runtime: Runtime) -> None:
    """Which boot each approach returns (the first read of warm_runtime)."""
    seed_boot = read_text(await run_seed(b.sshd, b.sshd.port, b.script), source="seed")
    seed_pair = capacity.read_budget(seed_boot).cards[0].pair_mib
    tac_boot = read_text(await run_seed(b.sshd, b.sshd.port, b.tac), source="tac")
    tac_pair = capacity.read_budget(tac_boot).cards[0].pair_mib
    ours = await read_budget_table(warm_runtime, b.args)
    counted = (f" counted from byte {ours.ledger.lines_from_byte:,}" if ours.ledger.lines_from_byte is not None
               else "")
    print(f"seed approach returns pair {seed_pair:,.0f} MiB (grep -m1 stops in the OLDEST boot); tac | awk "
          f"returns {tac_pair:,.0f} MiB; read_budget_table returns pair {ours.cards[0].pair_mib:,.0f} MiB from "
          f"boot {ours.ledger.boot} of {ours.ledger.boots_seen or 'not counted'}, lines "
          f"{ours.ledger.first_line:,}-{ours.ledger.last_line:,}{counted}")


async def bytes_over_ssh(b: Bench, warm_runtime: Runtime) -> None:
    """Bytes over SSH, both directions, one run each through the relay."""
    relay = b.relay
    relayed = fleet_for(b.sshd, b.log, {"bench": relay.port})
    relay.reset()
    await run_seed(b.sshd, relay.port, b.script)
    seed_bytes = (relay.up, relay.down)
    relay.reset()
    relay_runtime = Runtime(relayed)
    await read_budget_table(relay_runtime, b.args)
    cold_bytes = (relay.up, relay.down)
    relay.reset()
    await read_budget_table(relay_runtime, b.args)
    await close(relay_runtime)
    warm_bytes = (relay.up, relay.down)
    for name, (up, down) in (("seed", seed_bytes), ("cold", cold_bytes), ("warm", warm_bytes)):
        print(f"bytes over SSH, {name:4}: {up + down:>7,} ({up:,} up, {down:,} down)  "
              f"{'<= 64 KiB' if up + down <= 65536 else '> 64 KiB'}")
    pool = warm_runtime.ssh_pool
    print(f"payload per warm read: command {pool.transfer.sent_bytes // pool.transfer.commands:,} B, "
          f"answer {pool.transfer.received_bytes // pool.transfer.commands:,} B")


async def wall_time(b: Bench, warm_runtime: Runtime) -> None:
    """Wall time of the seed, tac, a cold and a warm read, alternating; medians compared."""
    repeat, sshd, args = b.options.repeat, b.sshd, b.args
    seed_s: list[float] = []
    tac_s: list[float] = []
    cold_s: list[float] = []
    warm_s: list[float] = []
    for _ in range(repeat):
        seed_s.append((await timed(lambda: run_seed(sshd, sshd.port, b.script)))[0])
        tac_s.append((await timed(lambda: run_seed(sshd, sshd.port, b.tac)))[0])
        cold_runtime = Runtime(b.fleet)
        cold_s.append((await timed(lambda: read_budget_table(cold_runtime, args)))[0])  # noqa: B023
        await close(cold_runtime)
        warm_s.append((await timed(lambda: read_budget_table(warm_runtime, args)))[0])
    seed_m, tac_m, cold_m, warm_m = (statistics.median(x) for x in (seed_s, tac_s, cold_s, warm_s))
    print(f"\nwall time, median of {repeat}:")
    print(f"  seed (ssh + grep -m1 per phrase)  {seed_m * 1000:7.1f} ms   (the OLDEST boot)")
    print(f"  ssh + tac | awk | tac              {tac_m * 1000:7.1f} ms   ratio {tac_m / seed_m:.2f}x seed")
    print(f"  read_budget_table, cold            {cold_m * 1000:7.1f} ms   ratio {cold_m / seed_m:.2f}x seed, "
          f"{cold_m / tac_m:.2f}x tac   (goal <= 1.25x seed)")
    print(f"  read_budget_table, warm            {warm_m * 1000:7.1f} ms   ratio {warm_m / seed_m:.2f}x seed   "
          f"(goal <= 0.1x)")


async def fan_out(b: Bench) -> None:
    """Services on ONE host entry, read at once, naming one big log or a small log each."""
    options = b.options
    small = b.base / "small"
    small.mkdir()
    for n in range(options.services):
        (small / f"s{n:02d}.log").write_text(older_boot(EXAMPLE) * 2 + EXAMPLE)
    scenarios: dict[str, Callable[[int], str]] = {
        f"all naming the 1 GiB log (its newest boot holds {options.size_mib // options.boots} MiB)":
            lambda n: str(b.log),
        "a log of its own each (3 boots, 3 KiB)": lambda n: str(small / f"s{n:02d}.log"),
    }
    for title, log_of in scenarios.items():
        print(f"\n{options.services} services on one host entry, {title}:")
        await fan_out_ours(b, log_of)
        await fan_out_seed(b, log_of)


async def fan_out_ours(b: Bench, log_of: Callable[[int], str]) -> None:
    """One read against all at once, cold (a fresh Runtime: connect first) and warm."""
    count = b.options.services
    many = Fleet.model_validate({
        "hosts": {"bench": b.sshd.host()},
        "services": {f"svc-{n:02d}": {"host": "bench", "log": log_of(n)} for n in range(count)},
    })
    services = [ReadBudgetTableInput.model_validate({"service": f"svc-{n:02d}"}) for n in range(count)]
    one_warm_s: list[float] = []
    one_cold_s: list[float] = []
    all_s: dict[str, list[float]] = {"cold": [], "warm": []}
    commands: dict[str, int] = {}
    for _ in range(max(3, b.options.repeat // 2)):
        runtime = Runtime(many)
        one_cold_s.append((await timed(lambda: read_budget_table(runtime, services[0])))[0])  # noqa: B023
        await close(runtime)
        runtime = Runtime(many)
        elapsed, results = await timed(lambda: asyncio.gather(*(read_budget_table(runtime, s) for s in services)))  # noqa: B023
        commands["cold"] = runtime.ssh_pool.transfer.commands
        assert all(r.cards[0].pair_mib == 29_120 for r in results)
        all_s["cold"].append(elapsed)
        # Warm: one read and all at once alternate on the same connection, repeat times each.
        for _ in range(b.options.repeat):
            one_warm_s.append((await timed(lambda: read_budget_table(runtime, services[0])))[0])  # noqa: B023
            before = runtime.ssh_pool.transfer.commands
            elapsed, results = await timed(
                lambda: asyncio.gather(*(read_budget_table(runtime, s) for s in services))  # noqa: B023
            )
            commands["warm"] = runtime.ssh_pool.transfer.commands - before
            assert all(r.cards[0].pair_mib == 29_120 for r in results)
            all_s["warm"].append(elapsed)
        await close(runtime)
    one_warm_m, one_cold_m = statistics.median(one_warm_s), statistics.median(one_cold_s)
    print(f"  one read: warm {one_warm_m * 1000:6.1f} ms, cold {one_cold_m * 1000:6.1f} ms")
    for label in ("cold", "warm"):
        all_m = statistics.median(all_s[label])
        one_m = one_cold_m if label == "cold" else one_warm_m
        print(f"  {label}: {count} at once {all_m * 1000:7.1f} ms in {commands[label]} command(s), "
              f"ratio {all_m / one_warm_m:5.2f}x one warm read (goal <= 3x), {all_m / one_m:5.2f}x one "
              f"{label} read")


async def fan_out_seed(b: Bench, log_of: Callable[[int], str]) -> None:
    """The seed's approach under the same load, for comparison: one ssh per service."""
    sshd, count = b.sshd, b.options.services
    scripts = [seed_script(Path(log_of(n))) for n in range(count)]
    one_s, seed_all_s = [], []
    for _ in range(max(3, b.options.repeat // 2)):
        one_s.append((await timed(lambda: run_seed(sshd, sshd.port, scripts[0])))[0])
        seed_all_s.append((await timed(
            lambda: asyncio.gather(*(run_seed(sshd, sshd.port, x) for x in scripts))
        ))[0])
    one_m, all_m = statistics.median(one_s), statistics.median(seed_all_s)
    print(f"  seed: one read {one_m * 1000:6.1f} ms, {count} at once {all_m * 1000:7.1f} ms, "
          f"ratio {all_m / one_m:5.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
