"""Reading the newest boot of a 1 GiB ledger of many boots, against `grep -c` over the same file.

Targets (issue 2): at most 3x grep's time, and a peak RSS at most 64 MiB above an idle
server's. Each side runs in its own process; the reader's time is taken around read_file()
inside its process (interpreter start and imports are the cold-start benchmark's business),
grep's around the whole command. Peak memory is each child's ru_maxrss (os.wait4), compared
with a child that only imports the server and builds it. A second case reads a 1 GiB line
without a newline. The files are written under /tmp and deleted afterwards.

    .venv/bin/python bench/bench_ledger.py [--size-mib 1024] [--boots 50] [--repeat 5]

Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "radiance_mcp" / "examples" / "frank-archon.log"

IDLE = """
from radiance_mcp.config import Fleet
from radiance_mcp.server import build_server
from radiance_mcp.runtime import Runtime
build_server(Runtime(Fleet()))
"""
READ = IDLE + """
import sys, time
from pathlib import Path
from radiance_mcp.errors import LedgerError
from radiance_mcp.ledger_file import read_file
start = time.perf_counter()
try:
    boot = read_file(Path(sys.argv[1]), source=sys.argv[1])
    result = f"boot {boot.index} of {boot.boots_seen}, {len(boot.hits)} hits, {boot.skipped_long_lines} skipped"
except LedgerError as exc:
    result = f"LedgerError: {str(exc)[:90]}"
print(time.perf_counter() - start, result)
"""


def filler_block(size_bytes: int) -> bytes:
    """Request-log lines as a serving engine prints them between boots (none holds a ledger phrase)."""
    lines = []
    n = 0
    total = 0
    while total < size_bytes:
        line = (
            f"I 2026-10-13T12:{n // 60 % 60:02d}:{n % 60:02d}.{n % 1000:03d}Z POST /v1/chat/completions 200 "
            f"req={n:08x} prompt={(n * 7919) % 200000} gen={(n * 31) % 4096} prefill {(n * 13) % 5000} t/s "
            f"decode {(n * 7) % 130}.{n % 10} t/s\n"
        )
        lines.append(line)
        total += len(line)
        n += 1
    return "".join(lines).encode()


def write_ledger(path: Path, size_bytes: int, boots: int) -> None:
    boot = EXAMPLE.read_text()
    per_boot = size_bytes // boots
    block = filler_block(min(per_boot, 4 << 20))
    with path.open("wb") as out:
        for number in range(boots):
            out.write(boot.replace("frank-archon", f"frank-archon-{number}").encode())
            written = 0
            while written + len(block) <= per_boot:
                out.write(block)
                written += len(block)
            rest = block[: per_boot - written]
            out.write(rest[: rest.rfind(b"\n") + 1])


def child(argv: list[str]) -> tuple[float, str, int]:
    """Run argv; return (wall seconds, stdout, peak RSS in KiB) of that one child."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read().decode()
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # grep -c exits 1 when it counts 0
        raise SystemExit(f"{argv[:3]} failed ({proc.returncode}): {err[-2000:]}")
    return elapsed, out.strip(), usage.ru_maxrss


def measure(path: Path, repeat: int) -> dict[str, object]:
    python = sys.executable
    grep_s, read_s, read_rss, idle_rss = [], [], [], []
    result = grep_out = ""
    child(["grep", "-c", "radiance boot", str(path)])  # warm the page cache for both sides
    for i in range(repeat):
        runs = [("grep", ["grep", "-c", "radiance boot", str(path)]), ("read", [python, "-c", READ, str(path)]),
                ("idle", [python, "-c", IDLE])]
        for name, argv in runs if i % 2 == 0 else reversed(runs):
            wall, out, rss = child(argv)
            if name == "grep":
                grep_s.append(wall)
                grep_out = out
            elif name == "read":
                seconds, _, result = out.partition(" ")
                read_s.append(float(seconds))
                read_rss.append(rss)
            else:
                idle_rss.append(rss)
    return {
        "grep_s": statistics.median(grep_s),
        "grep_count": grep_out,
        "read_s": statistics.median(read_s),
        "read_rss_mib": statistics.median(read_rss) / 1024,
        "idle_rss_mib": statistics.median(idle_rss) / 1024,
        "result": result,
    }


def report(title: str, path: Path, figures: dict[str, object], *, ratio: bool = True) -> None:
    grep_s, read_s = float(figures["grep_s"]), float(figures["read_s"])  # type: ignore[arg-type]
    read_rss, idle_rss = float(figures["read_rss_mib"]), float(figures["idle_rss_mib"])  # type: ignore[arg-type]
    print(f"\n{title}: {path.stat().st_size / 2**20:,.0f} MiB")
    print(f"  grep -c 'radiance boot'  {grep_s:7.3f} s  (count {figures['grep_count']})")
    print(f"  read_file newest boot    {read_s:7.3f} s  ({figures['result']})")
    if ratio:
        print(f"  time ratio read/grep     {read_s / grep_s:7.2f}x   (target <= 3x)")
    else:  # grep stops at the first NULs of a sparse file ('binary'); only the memory is compared
        print("  time ratio read/grep        n/a   (grep skips a binary file; memory only)")
    print(f"  peak RSS reader {read_rss:,.1f} MiB, idle server {idle_rss:,.1f} MiB: "
          f"+{read_rss - idle_rss:,.1f} MiB   (target <= +64 MiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--boots", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ledger-", dir="/tmp") as tmp:
        many = Path(tmp) / "many-boots.log"
        start = time.perf_counter()
        write_ledger(many, args.size_mib << 20, args.boots)
        print(f"wrote {many} in {time.perf_counter() - start:.1f} s; medians of {args.repeat} runs")
        report(f"{args.boots} boots with request-log filler", many, measure(many, args.repeat))
        many.unlink()

        line = Path(tmp) / "one-line.log"
        with line.open("wb") as out:
            out.write(EXAMPLE.read_bytes())
            out.truncate(args.size_mib << 20)  # a boot, then NULs to the end and no newline (sparse)
        report("a boot, then one line without a newline", line, measure(line, args.repeat), ratio=False)


if __name__ == "__main__":
    main()
