"""Reading the newest boot of a ledger, against the one-liner that reads it from the end (issue 15).

The alternative, measured in the same run on the same file:

    tac FILE | awk '/radiance boot/{print; exit} /<phrases>/{print}' | tac

(phrases: every keyword of the phrase table). Three ledgers of 64 MiB, 256 MiB and 1 GiB hold
boots of the same size (1 GiB / 50, request-log filler) and the same newest boot, so a read
that costs the boot and not the file takes the same time on all three. For each:

- first read: read_file() in a fresh process (nothing indexed), timed around the call
  (interpreter start and imports are the cold-start benchmark's business); the one-liner's
  time is its whole pipeline;
- repeat read of the unchanged file, and of the file after 64 KiB were appended, in the same
  process (the file is truncated back afterwards and its mtime restored);
- whole process: `radiance-mcp compute-ceiling --log FILE`, spawn to exit;
- peak RSS of the reading process against one that only builds the server (os.wait4).

Then a boot followed by a 1 GiB line with no newline (sparse): memory only. A file modified
less than RACY_NS ago is not trusted unchanged (its mtime may not move on the next write), so
each ledger is read at least that long after it was written. Files go under /tmp and are
deleted afterwards.

    .venv/bin/python bench/bench_ledger.py [--sizes-mib 64 256 1024] [--repeat 5]

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
CLI = Path(sys.executable).parent / "radiance-mcp"
BOOT_BYTES = (1 << 30) // 50

IDLE = """
from radiance_mcp.sources.config import Fleet
from radiance_mcp.app.server import build_server
from radiance_mcp.sources.runtime import Runtime
build_server(Runtime(Fleet()))
"""
READ = IDLE + """
import os, sys, time
from pathlib import Path
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.sources.ledger_file import read_file
path = Path(sys.argv[1])
def timed():
    start = time.perf_counter()
    try:
        boot = read_file(path, source=sys.argv[1])
        said = f"boot {boot.index}, {len(boot.hits)} hits, lines from byte {boot.lines_from_byte}"
    except LedgerError as exc:
        said = f"LedgerError: {str(exc)[:60]}"
    return time.perf_counter() - start, said
first, said = timed()
if sys.argv[2] == "all":
    repeat, _ = timed()
    st = os.stat(path)
    with path.open("ab") as out:
        out.write(b"I 2026-12-01T10:00:00Z GET /health 200 took 1 ms\\n" * 1311)  # 64 KiB
    appended, _ = timed()
    os.truncate(path, st.st_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    print(first, repeat, appended, said)
else:
    print(first, 0, 0, said)
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


def write_ledger(path: Path, size_bytes: int) -> int:
    """Boots of BOOT_BYTES each (the first takes what is left over), the newest one the same whatever the size."""
    boot = EXAMPLE.read_text()
    count = max(1, size_bytes // BOOT_BYTES)
    block = filler_block(4 << 20)
    with path.open("wb") as out:
        for number in range(count):
            per_boot = size_bytes - (count - 1) * BOOT_BYTES if number == 0 else BOOT_BYTES
            out.write(boot.replace("frank-archon", f"frank-archon-{number - count}").encode())
            written = 0
            while written + len(block) <= per_boot:
                out.write(block)
                written += len(block)
            rest = block[: per_boot - written]
            out.write(rest[: rest.rfind(b"\n") + 1])
    return count


def one_liner(path: Path) -> list[str]:
    from radiance_mcp.core.ledger import KEYWORDS

    phrases = "|".join(k.replace("-", r"\-") for k in KEYWORDS)
    return ["sh", "-c", f"tac '{path}' | awk '/radiance boot/{{print; exit}} /{phrases}/{{print}}' | tac"]


def child(argv: list[str]) -> float:
    """Run argv to its end; its wall seconds."""
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, cwd=ROOT, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"{argv[:3]} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return elapsed


def rss_kib(argv: list[str]) -> tuple[str, int]:
    """Run argv to its end; its stdout and peak RSS in KiB."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return out.strip(), usage.ru_maxrss


def measure(path: Path, repeat: int) -> dict[str, float | str]:
    python = sys.executable
    runs: dict[str, list[float]] = {"liner": [], "first": [], "repeat": [], "appended": [], "cli": [], "rss": [],
                                    "idle": []}
    said = ""
    child(one_liner(path))  # warm the page cache for both sides
    for i in range(repeat):
        order = ["liner", "read", "cli", "idle"]
        for name in order if i % 2 == 0 else reversed(order):
            if name == "liner":
                runs["liner"].append(child(one_liner(path)))
            elif name == "read":
                out, rss = rss_kib([python, "-c", READ, str(path), "all"])
                first, again, appended, said = out.split(" ", 3)
                runs["first"].append(float(first))
                runs["repeat"].append(float(again))
                runs["appended"].append(float(appended))
                runs["rss"].append(rss / 1024)
            elif name == "cli":
                runs["cli"].append(child([str(CLI), "compute-ceiling", "--log", str(path)]))
            else:
                runs["idle"].append(rss_kib([python, "-c", IDLE])[1] / 1024)
    figures: dict[str, float | str] = {name: statistics.median(values) for name, values in runs.items()}
    figures["said"] = said
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from radiance_mcp.sources.ledger_file import RACY_NS

    with tempfile.TemporaryDirectory(prefix="bench-ledger-", dir="/tmp") as tmp:
        files = []
        for size_mib in args.sizes_mib:
            path = Path(tmp) / f"ledger-{size_mib}.log"
            start = time.perf_counter()
            boots = write_ledger(path, size_mib << 20)
            print(f"wrote {path} ({boots} boots) in {time.perf_counter() - start:.1f} s")
            files.append((path, boots))
        time.sleep(RACY_NS / 1e9)
        print(f"medians of {args.repeat} runs; ratios against the one-liner in the same run\n")
        header = (f"{'ledger':>16} {'one-liner':>10} {'first read':>17} {'repeat':>16} {'appended':>16} "
                  f"{'CLI process':>17} {'peak RSS':>10}")
        print(header)
        firsts = []
        for path, boots in files:
            f = measure(path, args.repeat)
            liner = float(f["liner"])

            def cell(name: str, f: dict[str, float | str] = f, liner: float = liner) -> str:
                seconds = float(f[name])
                return f"{seconds * 1000:7.1f} ms {seconds / liner:5.2f}x"

            firsts.append(float(f["first"]))
            size_mib = path.stat().st_size / 2**20
            print(f"{size_mib:6,.0f} MiB/{boots:3d} boots {liner * 1000:7.1f} ms {cell('first')} {cell('repeat')} "
                  f"{cell('appended')} {cell('cli')} {float(f['rss']) - float(f['idle']):+7.1f} MiB")
            print(f"{'':>17}({f['said']})")
            path.unlink()
        print(f"\nfirst read, slowest / fastest across the sizes: {max(firsts) / min(firsts):.2f}x  (target <= 1.5x)")

        line = Path(tmp) / "one-line.log"
        with line.open("wb") as out:
            out.write(EXAMPLE.read_bytes())
            out.truncate(1 << 30)  # a boot, then NULs to 1 GiB and no newline (sparse)
        said, read_rss = rss_kib([sys.executable, "-c", READ, str(line), "first"])
        _, idle_rss = rss_kib([sys.executable, "-c", IDLE])
        print(f"a boot, then a 1 GiB line without a newline: read in {float(said.split()[0]) * 1000:.0f} ms, "
              f"peak RSS {(read_rss - idle_rss) / 1024:+.1f} MiB against an idle server (target <= +64 MiB)")


if __name__ == "__main__":
    main()
