"""check_serve_script knows each engine's flags, or refuses a script it cannot read (issue 25, item 6).

The finding: a fleet with engine = "llama.cpp" whose serve script's `wide` mode hard-coded
`--n_ctx 32768` passed, because the check knew radiance's flags only. Scripts in styles the seeds
never show: llama-server behind taskset with short flags, llama-cpp-python's underscore flags in an
if/elif chain, vLLM modes as functions over a shared argv array (underscore spellings, '=' forms),
SGLang building a flags string, vLLM in a container. Driven over MCP with the SDK's client; the
spellings are core.engine_facts.SHAPE_FLAGS, each cited to the engine's own source there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_call import call

from radiance_mcp.app.server import build_server
from radiance_mcp.core.audit.serve_script import EnvFile, check_script
from radiance_mcp.core.constants import LedgerEngine
from radiance_mcp.core.engine_facts import SHAPE_FLAGS
from radiance_mcp.core.errors import InputError
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.runtime import Runtime

LLAMA_ENV = """\
CTX=8192
SLOTS=2
KTYPE=f16
VTYPE=f16
"""

# llama-server behind taskset (whose -c is a CPU list), a python -c probe; `wide` passes its own -c and -ctk.
LLAMA_SERVER = """\
#!/usr/bin/env bash
set -euo pipefail
here=$(dirname "$0")
. "$here/llama.env"
python3 -c 'import sys; sys.exit(0)'
MODEL=/models/gemma-3-270m-it-Q8_0.gguf
case "${1:?mode}" in
  steady)
    exec taskset -c 0-7 llama-server -m "$MODEL" -c "$CTX" -np "$SLOTS" -ctk "$KTYPE" -ctv "$VTYPE" --port 8080 ;;
  wide)
    exec taskset -c 0-7 llama-server -m "$MODEL" -c 32768 -np "$SLOTS" -ctk q8_0 -ctv "$VTYPE" --port 8080 ;;
esac
"""

# The '=' form of the long flag, the window from the env file in both modes.
LLAMA_EQUALS = """\
#!/bin/sh
. ./llama.env
case "$1" in
  a) exec /opt/llama.cpp/build/bin/llama-server --model /m.gguf --ctx-size="$CTX" --parallel "$SLOTS" ;;
  b) exec /opt/llama.cpp/build/bin/llama-server --model /m.gguf --ctx-size="$CTX" --parallel "$SLOTS" --jinja ;;
esac
"""

GEMMA_ENV = "MODEL=/models/gemma-3-270m-it-Q8_0.gguf\nN_CTX=2048\nN_BATCH=512\n"

# The issue's finding: llama-cpp-python, an if/elif chain, `wide` hard-codes --n_ctx 32768.
LLAMA_CPP_PYTHON = """\
#!/usr/bin/env bash
source "${BASH_SOURCE%/*}/gemma.env"
serve() { python -m llama_cpp.server --model "$MODEL" --n_ctx "$N_CTX" --n_batch "$N_BATCH" "$@"; }
if [ "$1" = small ]; then
  serve --port 8000
elif [ "$1" = wide ]; then
  python -m llama_cpp.server --model "$MODEL" --n_ctx 32768 --n_batch "$N_BATCH" --port 8000
fi
"""

VLLM_ENV = "GPU_UTIL=0.90\nSEATS=8\nKV_DTYPE=fp8\nMAX_LEN=32768\n"

# vLLM modes as functions over a shared argv array; --max_num_seqs is vLLM's underscore spelling.
VLLM_FUNCTIONS = """\
#!/usr/bin/env bash
set -eu
. "$(dirname "$0")/vllm.env"
common=(--gpu-memory-utilization "$GPU_UTIL" --max_num_seqs "$SEATS" --kv-cache-dtype "$KV_DTYPE")
chat() { vllm serve Qwen/Qwen3-8B "${common[@]}" --max-model-len "$MAX_LEN"; }
long() { vllm serve Qwen/Qwen3-8B "${common[@]}" --max-model-len 65536 --gpu-memory-utilization 0.95; }
"$1"
"""

VLLM_EQUALS = """\
case $MODE in
  fast) vllm serve m --max-model-len=$MAX_LEN --max-num-seqs=$SEATS ;;
  big) vllm serve m --max-model-len=$MAX_LEN --max-num-seqs=$SEATS --enforce-eager ;;
esac
"""

SGLANG_ENV = "MODEL=/models/llama-3.1-8b\nMEM_FRACTION=0.85\nRUNNING=16\nCONTEXT=32768\n"

# SGLang: a flags string built per mode; `short` carries its own --context-length.
SGLANG = """\
#!/bin/bash
MODE=$1
ARGS="--model-path $MODEL --mem-fraction-static $MEM_FRACTION --max-running-requests $RUNNING"
if [[ $MODE == short ]]; then
  ARGS="$ARGS --context-length 8192"
else
  ARGS="$ARGS --context-length $CONTEXT"
fi
python3 -m sglang.launch_server $ARGS --port 30000
"""

# vLLM in a container: the image's arguments are the server's.
VLLM_DOCKER = """\
#!/bin/sh
case "$1" in
  serve) docker run --rm --gpus all -p 8000:8000 -v "$HOME/.cache/huggingface:/root/.cache/huggingface" \\
           vllm/vllm-openai:v0.9.1 --model "$MODEL" --max-num-seqs "$SEATS" ;;
  burst) docker run --rm --gpus all -p 8000:8000 vllm/vllm-openai:v0.9.1 --model "$MODEL" \\
           --max-num-seqs 8 --gpu-memory-utilization 0.5 ;;
esac
"""


def line_of(text: str, needle: str) -> int:
    (line,) = [n for n, text_line in enumerate(text.splitlines(), 1) if needle in text_line]
    return line


def write(directory: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


@asynccontextmanager
async def mcp(root: Path, services: dict[str, Any] | None = None) -> AsyncIterator[Client]:
    fleet = Fleet.model_validate({"server": {"log_roots": [str(root)]}, "services": services or {}})
    async with Client(build_server(Runtime(fleet))) as client:
        yield client


async def check(client: Client, **args: Any) -> dict[str, Any]:
    is_error, out = await call(client, "check_serve_script", **args)
    assert not is_error, out
    assert isinstance(out, dict)
    return out


def found(out: dict[str, Any]) -> set[tuple[str, int, str | None, str | None, str]]:
    return {(f["kind"], f["line"], f["mode"], f["flag"], f["value"]) for f in out["findings"]}


def engine_note(out: dict[str, Any]) -> str:
    (note,) = [n for n in out["notes"] if n.startswith("engine ")]
    return note


async def test_a_llama_server_mode_with_its_own_window_and_k_type_is_named(tmp_path: Path) -> None:
    write(tmp_path, {"serve.sh": LLAMA_SERVER, "llama.env": LLAMA_ENV})
    async with mcp(tmp_path) as client:
        out = await check(client, script=str(tmp_path / "serve.sh"))
    wide = line_of(LLAMA_SERVER, "-c 32768")
    # taskset's -c 0-7 and python's -c are not llama-server's: only the wide arm's own numbers are found.
    assert found(out) == {("literal", wide, "wide", "ctx-size", "32768"),
                          ("literal", wide, "wide", "cache-type-k", "q8_0")}
    assert out["ok"] is False and out["modes_with_findings"] == ["wide"]
    assert {o["flag"]: o["variable"] for o in out["owned"]} == {
        "ctx-size": "CTX", "parallel": "SLOTS", "cache-type-k": "KTYPE", "cache-type-v": "VTYPE"}
    message = next(f["message"] for f in out["findings"] if f["flag"] == "ctx-size")
    assert "passes -c 32768 itself" in message and 'pass "$CTX"' in message, message
    assert engine_note(out).startswith(f"engine llama.cpp (started at line {wide - 2}: 'llama-server')")


async def test_the_window_from_the_env_file_in_the_equals_form_passes_with_a_note(tmp_path: Path) -> None:
    write(tmp_path, {"serve.sh": LLAMA_EQUALS, "llama.env": LLAMA_ENV})
    async with mcp(tmp_path) as client:
        out = await check(client, script=str(tmp_path / "serve.sh"))
    assert out["ok"] is True and out["findings"] == []
    assert {o["flag"]: o["variable"] for o in out["owned"]} == {"ctx-size": "CTX", "parallel": "SLOTS"}
    # llama-server looks each argv word up whole (common/arg.cpp): --ctx-size=8192 is refused at launch.
    assert any(n.startswith(f"line {line_of(LLAMA_EQUALS, ' a) ')}: llama-server reads no --ctx-size=VALUE form")
               for n in out["notes"]), out["notes"]


async def test_the_issue_s_llama_cpp_python_wide_mode_is_found_through_the_fleet_engine(tmp_path: Path) -> None:
    write(tmp_path, {"gemma.sh": LLAMA_CPP_PYTHON, "gemma.env": GEMMA_ENV})
    services = {"gemma": {"serve_script": str(tmp_path / "gemma.sh"), "env_file": str(tmp_path / "gemma.env"),
                          "engine": "llama.cpp"}}
    async with mcp(tmp_path, services) as client:
        out = await check(client, service="gemma")
    assert found(out) == {("literal", line_of(LLAMA_CPP_PYTHON, "--n_ctx 32768"), "elif [ $1 = wide ]", "n_ctx",
                           "32768")}
    assert {o["flag"]: o["variable"] for o in out["owned"]} == {"n_ctx": "N_CTX", "n_batch": "N_BATCH"}
    assert engine_note(out).startswith("engine llama.cpp (from services.gemma.engine); the flags the env file owns: "
                                       "llama-cpp-python: window --n_ctx")


async def test_a_vllm_function_with_its_own_window_and_memory_share_is_named(tmp_path: Path) -> None:
    write(tmp_path, {"vllm.sh": VLLM_FUNCTIONS, "vllm.env": VLLM_ENV})
    async with mcp(tmp_path) as client:
        out = await check(client, script=str(tmp_path / "vllm.sh"))
    long = line_of(VLLM_FUNCTIONS, "65536")
    assert found(out) == {("literal", long, "long", "max-model-len", "65536"),
                          ("literal", long, "long", "gpu-memory-utilization", "0.95")}
    assert {o["flag"]: o["variable"] for o in out["owned"]} == {
        "gpu-memory-utilization": "GPU_UTIL", "max-num-seqs": "SEATS", "kv-cache-dtype": "KV_DTYPE",
        "max-model-len": "MAX_LEN"}  # --max_num_seqs is read as vLLM reads it: --max-num-seqs


async def test_vllm_equals_forms_from_the_env_file_pass() -> None:
    async with mcp(Path("/nonexistent")) as client:
        out = await check(client, script_text=VLLM_EQUALS, env_text=VLLM_ENV)
    assert out["ok"] is True and out["findings"] == []
    assert {o["flag"]: o["variable"] for o in out["owned"]} == {"max-model-len": "MAX_LEN", "max-num-seqs": "SEATS"}
    assert not any("VALUE form" in n for n in out["notes"])  # vLLM's argparse reads --flag=value


async def test_an_sglang_branch_with_its_own_context_length_in_a_flags_string_is_named() -> None:
    async with mcp(Path("/nonexistent")) as client:
        out = await check(client, script_text=SGLANG, env_text=SGLANG_ENV)
    assert found(out) == {("literal", line_of(SGLANG, "--context-length 8192"), "if [[ $MODE == short ]]",
                           "context-length", "8192")}
    assert {o["flag"]: o["variable"] for o in out["owned"]} == {
        "mem-fraction-static": "MEM_FRACTION", "max-running-requests": "RUNNING", "context-length": "CONTEXT"}
    assert engine_note(out).startswith(f"engine sglang (started at line {line_of(SGLANG, 'python3')}: "
                                       "'sglang.launch_server')")


async def test_a_vllm_container_mode_with_its_own_seats_and_memory_share_is_named() -> None:
    async with mcp(Path("/nonexistent")) as client:
        out = await check(client, script_text=VLLM_DOCKER, env_text="SEATS=4\nMODEL=/m\n")
    burst = line_of(VLLM_DOCKER, "--max-num-seqs 8")
    assert found(out) == {("literal", burst, "burst", "max-num-seqs", "8"),
                          ("literal", burst, "burst", "gpu-memory-utilization", "0.5")}
    image = line_of(VLLM_DOCKER, 'vllm/vllm-openai:v0.9.1 --model "$MODEL" --max-num-seqs "$SEATS"')
    assert engine_note(out).startswith(f"engine vllm (started at line {image}: 'vllm/vllm-openai:v0.9.1')")


# ---------------------------------------------------------------------------------------
# A script the check cannot read for its engine is refused, naming the engine and why


async def test_a_script_whose_engine_cannot_be_told_is_refused_until_named() -> None:
    script = 'exec "$SERVER_BIN" --max-model-len 65536 --max-num-seqs "$SEATS"\n'
    async with mcp(Path("/nonexistent")) as client:
        is_error, text = await call(client, "check_serve_script", script_text=script)
        named = await check(client, script_text=script, engine="vllm")
    assert is_error and "script_text: which engine it starts cannot be told" in text, text
    assert "vllm: vllm, python -m vllm.entrypoints.openai.api_server" in text, text
    assert "Name the engine: pass engine (one of radiance, vllm, sglang, llama.cpp)" in text, text
    assert found(named) == {("literal", 1, None, "max-model-len", "65536")}
    assert engine_note(named).startswith("engine vllm (from engine)")


@pytest.mark.parametrize(
    ("script", "engine", "says"),
    [
        ("exec llama-server -c 4096\n", "vllm",
         "services.svc.engine says vllm, but line 1 starts llama.cpp ('llama-server')"),
        ('vllm serve m --config "$HERE/shape.yaml" --max-num-seqs "$SEATS"\n', "vllm",
         "line 1 passes --config $HERE/shape.yaml to vllm, which reads more flags from that file"),
        ("python -m llama_cpp.server --config_file /etc/llm/models.json\n", None,
         "line 1 passes --config_file /etc/llm/models.json to llama-cpp-python"),
        ('case $1 in\n a) vllm serve m ;;\n b) python -m sglang.launch_server --model-path m ;;\nesac\n', None,
         "starts more than one engine (vllm at line 2 ('vllm'), sglang at line 3 ('sglang.launch_server'))"),
        ("docker compose -f serving.yml up -d\n", "sglang",
         "nothing in it starts sglang (sglang, python -m sglang.launch_server)"),
    ],
    ids=["another engine than the fleet's", "vllm --config", "llama-cpp-python --config_file", "two engines",
         "nothing of the engine"],
)
async def test_a_script_it_cannot_read_for_its_engine_is_refused(
    tmp_path: Path, script: str, engine: LedgerEngine | None, says: str
) -> None:
    write(tmp_path, {"serve.sh": script})
    services = {"svc": {"serve_script": str(tmp_path / "serve.sh"), "engine": engine}}
    async with mcp(tmp_path, services) as client:
        is_error, text = await call(client, "check_serve_script", service="svc")
    assert is_error and says in text, text
    assert text.startswith(str(tmp_path / "serve.sh")), text  # the script is named


async def test_engine_goes_with_a_script_not_with_a_service(tmp_path: Path) -> None:
    async with mcp(tmp_path, {"svc": {"serve_script": str(tmp_path / "s.sh")}}) as client:
        is_error, text = await call(client, "check_serve_script", service="svc", engine="vllm")
    assert is_error and "a service names its engine in the fleet config" in text, text


# ---------------------------------------------------------------------------------------
# The table itself


def test_every_engine_has_its_shape_flags_and_each_spelling_one_meaning() -> None:
    assert set(SHAPE_FLAGS) == {"radiance", "vllm", "sglang", "llama.cpp"}
    for engine, launchers in SHAPE_FLAGS.items():
        spellings = [s for launcher in launchers for flag in launcher.flags for s in flag.spellings]
        assert len(spellings) == len(set(spellings)), engine
        for launcher in launchers:
            assert launcher.programs or launcher.modules, launcher.name
            for flag in launcher.flags:
                assert flag.spellings[0].startswith("--"), flag  # the long spelling names the flag
    radiance = {flag.spellings for flag in SHAPE_FLAGS["radiance"][0].flags}
    assert radiance == {("--max-num-seqs",), ("--max-num-batched-tokens",), ("--host-pool-mib",),
                        ("--gpu-headroom-mib",)}  # what the check read before it knew other engines


@pytest.mark.parametrize(
    ("script", "engine", "expected"),
    [
        # vLLM and llama-server fold '_' into '-' in a '--' word; SGLang does not, so its flag is not read.
        ("vllm serve m --max_model_len 65536\n", None, {("max-model-len", "65536")}),
        ("llama-server --ctx_size 32768 -ub 512\n", None, {("ctx-size", "32768"), ("ubatch-size", "512")}),
        ("python -m sglang.launch_server --context_length 8192 --max-total-tokens 65536\n", None,
         {("max-total-tokens", "65536")}),
        # Short flags: a grep -c or bash -c is not the engine's; an array or a variable launcher's are.
        ('n=$(grep -c x /etc/hosts)\ngrep -c model /etc/llm.conf\nargs=(-c 4096 -np 2)\n"$LLAMA" "${args[@]}"\n',
         "llama.cpp", {("ctx-size", "4096"), ("parallel", "2")}),
        ("bash -c 'echo 1' -b 3\nexec llama-server -b 2048\n", None, {("batch-size", "2048")}),
    ],
)
def test_spellings_as_each_engine_reads_them(script: str, engine: LedgerEngine | None,
                                             expected: set[tuple[str, str]]) -> None:
    result = check_script(script, (), script_name="s", engine=engine)
    assert {(f.flag, f.value) for f in result.findings} == expected


def test_radiance_scripts_still_need_no_engine_and_other_engines_flags_are_not_radiance_s() -> None:
    script = "exec radiance serve --max-num-seqs 4 --max-model-len 65536 -c 3 --gpu-memory-utilization 0.5\n"
    result = check_script(script, [EnvFile("e.env", "S=1\n")], script_name="s")
    assert result.engine == "radiance"
    assert [(f.kind, f.flag, f.value) for f in result.findings] == [("literal", "max-num-seqs", "4")]
    with pytest.raises(InputError, match="which engine it starts cannot be told"):
        check_script("#!/bin/sh\n", (), script_name="s")
