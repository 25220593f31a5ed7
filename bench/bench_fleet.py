"""plan_free_vram over a whole fleet over SSH: 125 asyncssh hosts on loopback, 8 services each (issue 26).

Target (issue 26 item 2), on 2 cores: the 1,000-service answer within 8 s cold and 3 s warm of the
request, with at most one connection and one command per host per call; the time reported against
one warm read (read_budget_table of one service over the same MCP session) and how it grows from
125 to 1,000 services; the same fleet of local files beside it.

    hosts   one process holding N asyncssh servers on 127.0.0.1 (one port each, one host key, as
            tests/support/ssh_hosts.py's server: each command a real /bin/sh in the host's
            directory); it records when each connection is accepted and logged in and when each
            command starts and ends (CLOCK_MONOTONIC, which this process reads too)
    fleet   services 0..S-1, 8 to a host (h000 holds s0000-s0007), each with a card of its own and
            a log of its own: small (3 boots, 3 KiB, the newest the example ledger) or 20 MiB (an
            older boot and 19 MiB of its request lines, then the newest, the example, and 1 MiB of
            its own; all hard links of one file, so the page cache holds 20 MiB, not 20 GiB)
    server  `python -m radiance_mcp serve --config FLEET` spawned by the SDK's client over stdio
            (mcp.Client); spawn and initialize are not timed
    cold    the first plan_free_vram {} (the whole fleet) of a fresh server: every host connected
            and logged in, every log read for the first time
    warm    the next calls on the same server (pooled connections, the last reads remembered)
    one     read_budget_table {service: s0000} on that server after the warm calls: one warm read
    local   the same services with their logs on this machine (no host), the same call

Phases of a call, from the host's record: the request to the last login (cold only), to the
last host command's end, and from that end to the answer in the client (the answer's
validation, dump, transport and the client's own reading of it). CPU seconds of the server,
the hosts' process and the client during the call beside them; the answer's size (its
structured content and its text content) too.

    .venv/bin/python bench/bench_fleet.py [--services 125,250,500,1000] [--logs small,20mib]
                                          [--repeat 3] [--warm 3] [--no-local] [--code CHECKOUT]

Prints figures and ratios; asserts nothing but that the answer covers every service and read every ledger.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

PER_HOST = 8
BIG_MIB = 20


# ---------------------------------------------------------------------------------------
# The hosts' process: `bench_fleet.py --hosts N --base DIR`


async def serve_hosts(count: int, base: Path) -> None:
    """N asyncssh servers; prints {"ports": [...], "key": "..."}, then answers each stdin line with the events."""
    import asyncssh

    host_key = asyncssh.import_private_key((base / "host_key").read_bytes())
    authorized = asyncssh.read_authorized_keys(str(base / "client_key.pub"))
    events: list[tuple[float, int, str]] = []

    def server_for(index: int) -> type[asyncssh.SSHServer]:
        class Server(asyncssh.SSHServer):
            def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
                events.append((time.monotonic(), index, "accept"))

            def auth_completed(self) -> None:
                events.append((time.monotonic(), index, "login"))

        return Server

    async def run(process: asyncssh.SSHServerProcess[bytes], index: int) -> None:
        events.append((time.monotonic(), index, "start"))
        root = base / "hosts" / f"h{index:03d}"
        script = await process.stdin.read()
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", process.command or "", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=root, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        out, err = await proc.communicate(script)
        process.stdout.write(out)
        process.stderr.write(err)
        events.append((time.monotonic(), index, "end"))
        process.exit(proc.returncode or 0)

    ports = []
    for index in range(count):
        acceptor = await asyncssh.listen(
            "127.0.0.1", 0, server_factory=server_for(index), server_host_keys=[host_key],
            authorized_client_keys=authorized, encoding=None,
            process_factory=lambda process, i=index: run(process, i))
        ports.append(acceptor.sockets[0].getsockname()[1])
    print(json.dumps({"ports": ports}), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        print(json.dumps(events), flush=True)
        events.clear()


class Hosts:
    """The hosts' process, seen from the bench."""

    def __init__(self, count: int, base: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--hosts", str(count), "--base", str(base)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.ports: list[int] = json.loads(self.proc.stdout.readline())["ports"]

    def events(self) -> list[tuple[float, int, str]]:
        """The events since the last ask."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("events\n")
        self.proc.stdin.flush()
        return [tuple(e) for e in json.loads(self.proc.stdout.readline())]  # type: ignore[misc]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def cpu_s(pid: int) -> float:
    """CPU seconds of the process and of its children it has waited for (a host's sh and awk, the server's grep)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def server_pid() -> int:
    """The radiance_mcp server this process spawned (the stdio client's child)."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[1] != me:
                continue
            if b"radiance_mcp" in (stat.parent / "cmdline").read_bytes():
                return int(stat.parent.name)
        except (OSError, IndexError):
            continue
    raise SystemExit("the server process was not found")


# ---------------------------------------------------------------------------------------
# The fleet


def write_files(base: Path, hosts: int) -> None:
    """The keys, and each host's directory with PER_HOST small logs and PER_HOST links to the 20 MiB log."""
    from bench_remote import EXAMPLE, FILLER, older_boot

    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / name)], check=True)
    big = base / "big.log"
    with big.open("w") as out:  # an older boot and 19 MiB of its requests, then the newest boot and 1 MiB
        end = 0
        for boot, mib in ((older_boot(EXAMPLE), BIG_MIB - 1), (EXAMPLE, 1)):
            out.write(boot)
            end, n = end + mib * 2**20, 0
            while out.tell() < end:
                out.write(FILLER.format(m=n // 60 % 60, s=n % 60, ms=n % 1000, n=n, p=1000 + n * 7 % 90_000))
                n += 1
    small = older_boot(EXAMPLE) * 2 + EXAMPLE
    for h in range(hosts):
        for kind in ("small", "20mib"):
            logs = base / "hosts" / f"h{h:03d}" / "logs" / kind
            logs.mkdir(parents=True)
            for s in range(PER_HOST):
                if kind == "small":
                    (logs / f"s{s}.log").write_text(small)
                else:
                    os.link(big, logs / f"s{s}.log")
    subprocess.run(["cat", str(big)], stdout=subprocess.DEVNULL, check=True)


def fleet_toml(base: Path, services: int, logs: str, ports: list[int] | None) -> Path:
    """The fleet file: services 0..services-1, PER_HOST to a host; on this machine when ports is None."""
    lines = [f'[server]\nknown_hosts = "{base / "known_hosts"}"\nlog_roots = ["{base / "hosts"}"]\n']
    hosts = (services + PER_HOST - 1) // PER_HOST
    for h in range(hosts if ports is not None else 0):
        lines.append(f'[hosts.h{h:03d}]\naddress = "127.0.0.1"\nport = {ports[h]}\nuser = "bench"\n'  # type: ignore[index]
                     f'identity = "{base / "client_key"}"\nlog_roots = ["{base / "hosts" / f"h{h:03d}" / "logs"}"]\n')
    for n in range(services):
        h, s = divmod(n, PER_HOST)
        host = f'host = "h{h:03d}"\n' if ports is not None else ""
        log = base / "hosts" / f"h{h:03d}" / "logs" / logs / f"s{s}.log"
        lines.append(f'[services.s{n:04d}]\n{host}log = "{log}"\ncards = ["h{h:03d}:{s}"]\n')
    path = base / f"fleet-{services}-{logs}-{'ssh' if ports is not None else 'local'}.toml"
    path.write_text("\n".join(lines))
    return path


# ---------------------------------------------------------------------------------------
# The calls


@dataclass
class Call:
    wall_s: float
    server_cpu_s: float
    client_cpu_s: float
    hosts_cpu_s: float = 0.0
    answer_bytes: int = 0
    text_bytes: int = 0
    image_bytes: int = 0
    logins: int = 0
    last_login_s: float | None = None
    commands: int = 0
    most_commands_on_a_host: int = 0
    connections: int = 0
    last_end_s: float | None = None
    """From the request to the last host command's end."""


@dataclass
class Runs:
    cold: list[Call] = field(default_factory=list)
    warm: list[Call] = field(default_factory=list)
    one: list[float] = field(default_factory=list)


async def timed_call(client: Any, tool: str, arguments: dict[str, Any], pid: int, hosts: Hosts | None,
                     services: int | None) -> Call:
    from mcp.types import ImageContent, TextContent

    if hosts is not None:
        hosts.events()  # drop what came before
        hosts_before = cpu_s(hosts.proc.pid)
    server_before, client_before = cpu_s(pid), time.process_time()
    start = time.monotonic()
    result = await client.call_tool(tool, arguments)
    wall = time.monotonic() - start
    call = Call(wall, cpu_s(pid) - server_before, time.process_time() - client_before)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content[0].text[:2000]}")
    if services is not None:
        planned = result.structured_content
        unread = [p for p in planned["problems"] if p["kind"] in ("unreadable ledger", "unsettled boot")]
        assert planned["services_total"] == services and not unread, (planned["services_total"], unread[:3])
    call.answer_bytes = len(json.dumps(result.structured_content))
    call.text_bytes = sum(len(c.text) for c in result.content if isinstance(c, TextContent))
    call.image_bytes = sum(len(c.data) for c in result.content if isinstance(c, ImageContent))
    if hosts is not None:
        call.hosts_cpu_s = cpu_s(hosts.proc.pid) - hosts_before
        events = hosts.events()
        logins = [t for t, _, kind in events if kind == "login"]
        ends = [t for t, _, kind in events if kind == "end"]
        per_host = Counter(i for _, i, kind in events if kind == "start")
        call.logins = len(logins)
        call.connections = sum(1 for _, _, kind in events if kind == "accept")
        call.last_login_s = max(logins) - start if logins else None
        call.last_end_s = max(ends) - start if ends else None
        call.commands = sum(per_host.values())
        call.most_commands_on_a_host = max(per_host.values(), default=0)
    return call


async def measure(config: Path, services: int, hosts: Hosts | None, options: argparse.Namespace,
                  cache: Path) -> Runs:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    runs = Runs()
    code = str(options.code or ROOT)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": code}
    params = StdioServerParameters(command=sys.executable, args=["-m", "radiance_mcp", "serve", "--config",
                                                                 str(config)], cwd=code, env=env)
    for _ in range(options.repeat):
        async with Client(params) as client:
            pid = server_pid()
            runs.cold.append(await timed_call(client, "plan_free_vram", {}, pid, hosts, services))
            for _ in range(options.warm):
                runs.warm.append(await timed_call(client, "plan_free_vram", {}, pid, hosts, services))
            for _ in range(5):
                one = await timed_call(client, "read_budget_table", {"service": "s0000"}, pid, None, None)
                runs.one.append(one.wall_s)
    return runs


def med(values: list[float]) -> float:
    return statistics.median(values)


def report(title: str, runs: Runs) -> None:
    one = med(runs.one)
    print(f"\n{title}: one warm read {one * 1000:.1f} ms")
    for label, calls in (("cold", runs.cold), ("warm", runs.warm)):
        wall = med([c.wall_s for c in calls])
        walls = ", ".join(f"{c.wall_s:.2f}" for c in calls)
        print(f"  {label}: {wall:6.2f} s = {wall / one:6.0f}x one warm read (runs {walls}); CPU server "
              f"{med([c.server_cpu_s for c in calls]):.2f} s, client {med([c.client_cpu_s for c in calls]):.2f} s, "
              f"hosts {med([c.hosts_cpu_s for c in calls]):.2f} s")
        ends = [c.last_end_s for c in calls if c.last_end_s is not None]
        if not ends:
            continue
        logins = [c.last_login_s for c in calls if c.last_login_s is not None]
        last_end = med(ends)
        login = f"last login at {med(logins):.2f} s, " if logins else ""
        print(f"        {login}last command ended at {last_end:.2f} s, then {wall - last_end:.2f} s to the answer; "
              f"{calls[-1].connections} connections, {calls[-1].commands} commands "
              f"(at most {calls[-1].most_commands_on_a_host} on a host)")
    last = runs.warm[-1]
    print(f"  answer: structured {last.answer_bytes / 1e6:.1f} MB, text {last.text_bytes / 1e6:.1f} MB, "
          f"SVG (base64) {last.image_bytes / 1e6:.1f} MB")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--hosts", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--base", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--services", default="125,250,500,1000")
    parser.add_argument("--logs", default="small,20mib")
    parser.add_argument("--repeat", type=int, default=3, help="fresh servers (a cold call each)")
    parser.add_argument("--warm", type=int, default=3, help="warm calls after each cold one")
    parser.add_argument("--no-local", action="store_true")
    parser.add_argument("--no-ssh", action="store_true", help="the local files alone (no hosts' calls)")
    parser.add_argument("--code", type=Path, help="the checkout whose server is measured (default: this one)")
    options = parser.parse_args()
    if options.hosts is not None:
        await serve_hosts(options.hosts, options.base)
        return
    sizes = [int(n) for n in options.services.split(",")]
    host_count = (max(sizes) + PER_HOST - 1) // PER_HOST
    base = Path(tempfile.mkdtemp(prefix="bench-fleet-", dir="/tmp"))
    hosts: Hosts | None = None
    try:
        write_files(base, host_count)
        hosts = Hosts(host_count, base)
        key = " ".join((base / "host_key.pub").read_text().split()[:2])
        (base / "known_hosts").write_text("".join(f"[127.0.0.1]:{port} {key}\n" for port in hosts.ports))
        print(f"{host_count} asyncssh hosts on loopback, {PER_HOST} services each; python {sys.version.split()[0]}, "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        for logs in options.logs.split(","):
            for services in sizes if not options.no_ssh else ():
                config = fleet_toml(base, services, logs, hosts.ports)
                runs = await measure(config, services, hosts, options, base / "cache")
                report(f"{services} services on {(services + PER_HOST - 1) // PER_HOST} hosts, {logs} logs, over SSH",
                       runs)
            if not options.no_local:
                config = fleet_toml(base, max(sizes), logs, None)
                report(f"{max(sizes)} services, {logs} logs, local files",
                       await measure(config, max(sizes), None, options, base / "cache"))
        print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    finally:
        if hosts is not None:
            hosts.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
