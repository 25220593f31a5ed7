"""check_serve_script reads ownership from the files (issue 9, finding 7).

Scripts in styles the procedures never show: if/elif chains over a mode variable, one function
per mode, case arms building a plain flags string; env variables named after the flags
(LLM_MAX_NUM_SEQS for --max-num-seqs) and named otherwise (SEATS, STEP); env files reached
through $here, "$(dirname "$0")", ${BASH_SOURCE%/*}, readlink -f, './x.env', and a script that
sources nothing. Driven over MCP with the SDK client, on files under the server's log roots.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.core.audit.serve_script import EnvFile, check_script, source_lines
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.runtime import Runtime

# Env variables named after the flags.
FLAG_NAMED_ENV = """\
# shape for the long-context box
export LLM_MAX_NUM_SEQS=3
export LLM_MAX_NUM_BATCHED_TOKENS=2048
export LLM_HOST_POOL_MIB=6144
export LLM_GPU_HEADROOM_MIB=128
LLM_MODEL_DIR=/models/long
"""

# if/elif over a mode variable, a plain flags string; every mode inherits every shaped number.
IF_CHAIN_CLEAN = """\
#!/bin/bash
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/llm.env"
MODE=${1:-fp8}
FLAGS="--max-num-seqs $LLM_MAX_NUM_SEQS --max-num-batched-tokens $LLM_MAX_NUM_BATCHED_TOKENS"
if [ "$MODE" = fp8 ]; then
    DTYPE=fp8
elif [ "$MODE" = bf16 ]; then
    DTYPE=bf16
elif [ "$MODE" = long ]; then
    DTYPE=fp8
    FLAGS="$FLAGS --host-pool-mib $LLM_HOST_POOL_MIB"
else
    echo "usage: $0 fp8|bf16|long" >&2; exit 64
fi
radiance --kv-cache-dtype "$DTYPE" $FLAGS --gpu-headroom-mib "$LLM_GPU_HEADROOM_MIB"
"""

# The same chain where 'long' carries its own step and seats.
IF_CHAIN_DIRTY = IF_CHAIN_CLEAN.replace(
    '    FLAGS="$FLAGS --host-pool-mib $LLM_HOST_POOL_MIB"',
    '    FLAGS="--max-num-seqs 1 --max-num-batched-tokens 32768 --host-pool-mib $LLM_HOST_POOL_MIB"',
)

# Env variables named otherwise, one function per mode, an argv array, reached by ${BASH_SOURCE%/*}.
PLAIN_ENV = """\
SEATS=4
STEP=1024
SPILL=7000
MARGIN=96
SEATS_WIDE=8
"""

FUNCTIONS = """\
#!/usr/bin/env bash
set -eu
. "${BASH_SOURCE%/*}/shape.env"

common=(--host-pool-mib "$SPILL" --gpu-headroom-mib "$MARGIN")

run_quality() {
  local argv=(radiance --max-num-seqs "$SEATS" --max-num-batched-tokens "$STEP" "${common[@]}")
  exec "${argv[@]}"
}

run_wide() {
  local argv=(radiance --max-num-seqs "$SEATS_WIDE" --max-num-batched-tokens "$STEP" "${common[@]}")
  exec "${argv[@]}"
}

run_fast() {
  STEP=16384
  local argv=(radiance --max-num-seqs "$SEATS" --max-num-batched-tokens "$STEP" "${common[@]}")
  exec "${argv[@]}"
}

"run_${1:?mode}"
"""

# A script that sources nothing: one case arm passes literals, one a variable from nowhere.
NO_SOURCE = """\
#!/bin/sh
case $1 in
  (a) exec radiance --max-num-seqs=6 --max-num-batched-tokens "${MNBT:-4096}" ;;
  (b) exec radiance --max-num-seqs "$SEATS" ;;
esac
"""


def line_of(text: str, needle: str) -> int:
    (line,) = [n for n, text_line in enumerate(text.splitlines(), 1) if needle in text_line]
    return line


@asynccontextmanager
async def mcp(root: Path) -> AsyncIterator[Client]:
    fleet = Fleet.model_validate({"server": {"log_roots": [str(root)]}})
    async with Client(build_server(Runtime(fleet))) as client:
        yield client


async def check(client: Client, **args: Any) -> dict[str, Any]:
    result = await client.call_tool("check_serve_script", args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def write(directory: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return directory


async def test_flag_named_env_variables_are_owners_not_aliases(tmp_path: Path) -> None:
    # The finding: with variables named after the flags the env file's own variables were called
    # "per-mode aliases" of variables that do not exist, and modes that inherit were flagged.
    write(tmp_path, {"serve.sh": IF_CHAIN_CLEAN, "llm.env": FLAG_NAMED_ENV})
    async with mcp(tmp_path) as client:
        out = await check(client, script=str(tmp_path / "serve.sh"))
    assert out["ok"] is True and out["findings"] == [] and out["remedy"] == []
    assert out["env_file"] == str(tmp_path / "llm.env") and out["sources_env_file"] is True
    assert {o["flag"]: (o["variable"], o["value"], o["line"]) for o in out["owned"]} == {
        "max-num-seqs": ("LLM_MAX_NUM_SEQS", "3", 2),
        "max-num-batched-tokens": ("LLM_MAX_NUM_BATCHED_TOKENS", "2048", 3),
        "host-pool-mib": ("LLM_HOST_POOL_MIB", "6144", 4),
        "gpu-headroom-mib": ("LLM_GPU_HEADROOM_MIB", "128", 5),
    }
    assert [m["mode"] for m in out["modes"]] == [
        'if [ $MODE = fp8 ]', 'elif [ $MODE = bf16 ]', 'elif [ $MODE = long ]', "else",
    ]
    assert not any("alias" in note or "prefix" in note for note in out["notes"])


async def test_an_elif_branch_with_its_own_numbers_is_named(tmp_path: Path) -> None:
    write(tmp_path, {"serve.sh": IF_CHAIN_DIRTY, "llm.env": FLAG_NAMED_ENV})
    async with mcp(tmp_path) as client:
        out = await check(client, script=str(tmp_path / "serve.sh"))
    line = line_of(IF_CHAIN_DIRTY, "--max-num-seqs 1 ")
    assert out["ok"] is False and out["modes_with_findings"] == ["elif [ $MODE = long ]"]
    assert [(f["kind"], f["line"], f["flag"], f["value"]) for f in out["findings"]] == [
        ("literal", line, "max-num-seqs", "1"),
        ("literal", line, "max-num-batched-tokens", "32768"),
    ]
    message = out["findings"][0]["message"]
    assert 'pass "$LLM_MAX_NUM_SEQS"' in message and "llm.env line 2" in message


async def test_functions_with_plainly_named_env_variables(tmp_path: Path) -> None:
    write(tmp_path, {"bin/serve": FUNCTIONS, "bin/shape.env": PLAIN_ENV})
    async with mcp(tmp_path) as client:
        out = await check(client, script=str(tmp_path / "bin/serve"))
    got = {(f["kind"], f["file"].rsplit("/", 1)[-1], f["line"], f["mode"], f["variable"]) for f in out["findings"]}
    assert got == {
        # run_wide passes a second env variable to --max-num-seqs: SEATS is passed by two modes, SEATS_WIDE by one.
        ("alias", "serve", line_of(FUNCTIONS, '"$SEATS_WIDE"'), "run_wide", "SEATS_WIDE"),
        ("alias", "shape.env", line_of(PLAIN_ENV, "SEATS_WIDE"), None, "SEATS_WIDE"),
        # run_fast assigns the env file's STEP before passing it.
        ("override", "serve", line_of(FUNCTIONS, "STEP=16384"), "run_fast", "STEP"),
    }
    owned = {o["flag"]: o["variable"] for o in out["owned"]}
    assert owned == {"max-num-seqs": "SEATS", "max-num-batched-tokens": "STEP", "host-pool-mib": "SPILL",
                     "gpu-headroom-mib": "MARGIN"}
    assert out["modes_with_findings"] == ["run_wide", "run_fast"]  # run_quality inherits everything


async def test_without_an_env_file_only_literals_and_no_invented_names(tmp_path: Path) -> None:
    # The finding: a prefix (SCRIPT_TEXT_) was derived from the argument's name, and correct
    # variables were to be renamed to it.
    write(tmp_path, {"serve.sh": NO_SOURCE})
    async with mcp(tmp_path) as client:
        for args in ({"script": str(tmp_path / "serve.sh")}, {"script_text": NO_SOURCE}):
            out = await check(client, **args)
            assert out["env_file"] is None and out["owned"] == [] and out["sources_env_file"] is None
            assert [(f["kind"], f["mode"], f["flag"], f["value"]) for f in out["findings"]] == [
                ("default", "a", "max-num-batched-tokens", "4096"),
                ("literal", "a", "max-num-seqs", "6"),
            ]  # "$SEATS" in arm b is not judged: what defines it is unknown
            text = str(out)
            assert "SCRIPT_TEXT_" not in text and "SERVE_" not in text and "prefix" not in text
            assert any(note.startswith("no env file") for note in out["notes"])
            assert any("ownership was not checked" in r for r in out["remedy"])


async def test_an_env_file_that_is_not_there_is_said_not_guessed(tmp_path: Path) -> None:
    script = 'source "$(dirname "$0")/gone.env"\nradiance --max-num-seqs "$N" --host-pool-mib 512\n'
    write(tmp_path, {"serve.sh": script, "serve.env": "N=2\n"})  # a .env beside it that it does not source
    async with mcp(tmp_path) as client:
        out = await check(client, script=str(tmp_path / "serve.sh"))
    assert out["env_file"] is None
    assert any(f"line 1: the script sources {tmp_path}/gone.env, which is not there" in n for n in out["notes"])
    assert [(f["kind"], f["value"]) for f in out["findings"]] == [("literal", "512")]


async def test_a_sourced_file_outside_the_roots_is_not_read_and_is_noted(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    write(root, {"serve.sh": "source ../secret.env\nradiance --max-num-seqs \"$S\"\n"})
    write(tmp_path, {"secret.env": "S=hunter2\n"})
    async with mcp(root) as client:
        result = await client.call_tool("check_serve_script", {"script": str(root / "serve.sh")})
    assert not result.is_error and result.structured_content is not None
    out = result.structured_content
    assert "hunter2" not in str(out) and out["env_file"] is None
    assert any("secret.env" in n and "outside the allowed log roots" in n for n in out["notes"]), out["notes"]


@pytest.mark.parametrize(
    ("script", "resolved"),
    [
        ('. ./site.env', "/opt/llm/site.env"),
        ('source site.env', "/opt/llm/site.env"),
        ('source "$(dirname "$0")/conf/site.env"', "/opt/llm/conf/site.env"),
        ("source ${BASH_SOURCE%/*}/../etc/site.env", "/opt/etc/site.env"),
        ('. "$(dirname "$(readlink -f "$0")")/site.env"', "/opt/llm/site.env"),
        ('HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" >/dev/null 2>&1 && pwd -P)\nsource "${HERE}/site.env"',
         "/opt/llm/site.env"),
        ('conf_dir="$(dirname "$0")/conf"\nenv_file=$conf_dir/site.env\n. "$env_file"', "/opt/llm/conf/site.env"),
        ('source /etc/llm/site.env', "/etc/llm/site.env"),
        ('[ -r "$(dirname "$0")/site.env" ] && . "$(dirname "$0")/site.env"', "/opt/llm/site.env"),
    ],
)
def test_source_lines_resolve_statically(script: str, resolved: str) -> None:
    (found,) = source_lines(script + "\n", "/opt/llm/serve.sh")
    assert (found.path, found.why) == (resolved, None)


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ('source "$HOME/llm.env"', "depends on what only a run of the script knows"),
        ('source ~/llm.env', "depends on what only a run of the script knows"),
        ('source "$1"', "depends on what only a run of the script knows"),
        ('if [ "$M" = a ]; then E=a.env; else E=b.env; fi\nsource "$E"', "depends on what only a run"),
    ],
)
def test_source_lines_that_need_a_run_are_said_not_guessed(script: str, why: str) -> None:
    (found,) = source_lines(script + "\n", "/opt/llm/serve.sh")
    assert found.path is None and found.why is not None and why in found.why


def test_a_relative_source_of_a_script_given_as_text_is_not_resolved() -> None:
    (found,) = source_lines(". ./site.env\n", None)
    assert found.path is None and "unknown for a script given as text" in (found.why or "")


def test_a_mode_that_inherits_every_number_has_no_finding_whatever_the_names() -> None:
    # Owners named after nothing in particular; the shared part passes them, each mode adds only its dtype.
    env = "a=2\nb=512\nc=4096\nd=64\n"
    script = """\
args="--max-num-seqs $a --max-num-batched-tokens $b --host-pool-mib $c --gpu-headroom-mib $d"
case "$1" in
  one) exec radiance $args --kv-cache-dtype fp8 ;;
  two) exec radiance $args --kv-cache-dtype bf16 ;;
esac
"""
    result = check_script(script, [EnvFile("e.env", env)], script_name="s")
    assert result.ok and {o.flag: o.name for o in result.owned} == {
        "max-num-seqs": "a", "max-num-batched-tokens": "b", "host-pool-mib": "c", "gpu-headroom-mib": "d"}


def test_pathological_variable_graphs_end_without_a_guess() -> None:
    # A cycle, a chain far deeper than any script, and a source word built from itself: each ends,
    # claims nothing it did not follow, and never overflows the stack.
    cycle = "a=$b\nb=$a\nradiance --max-num-seqs \"$a\" --host-pool-mib \"${a:-5}\"\n"
    result = check_script(cycle, [EnvFile("e.env", "S=1\n")], script_name="s")
    assert [(f.kind, f.flag, f.value) for f in result.findings] == [("default", "host-pool-mib", "5")]
    chain = "".join(f"v{i}=$v{i + 1}\n" for i in range(5_000)) + "v5000=9\nradiance --max-num-seqs $v0\n"
    assert check_script(chain, [EnvFile("e.env", "S=1\n")], script_name="s").findings == ()
    (found,) = source_lines("x=$x/a\nsource \"$x\"\n", "/opt/s.sh")
    assert found.path is None and found.why is not None
