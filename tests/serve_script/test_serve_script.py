"""serve_script.check_script: realistic multi-mode serve scripts, with and without private literals."""

from __future__ import annotations

import pytest

from radiance_mcp.core.audit.serve_script import EnvFile, check_script, handles_dry_run, tokenize

ENV = """\
# scripts/frank-archon.env: the one home of the serving shape
FRANK_ARCHON_MAX_SEQS=8
FRANK_ARCHON_MAX_BATCHED_TOKENS=1024   # proven: arena 504 MiB
export FRANK_ARCHON_HOST_POOL_MIB="7580"
FRANK_ARCHON_GPU_HEADROOM_MIB='96'
FRANK_ARCHON_MODEL=/models/qwen38
"""

ENV_WITH_ALIAS = ENV + "FRANK_ARCHON_BF16_MAX_SEQS=4\n"

# Clean: case arms, every shaped number from the env file; comments, a heredoc usage text and
# quoted messages mention the flags with numbers, and must not count.
CLEAN_CASE = """\
#!/usr/bin/env bash
# Modes: fp8 (proven) and bf16. Do NOT pass --max-num-seqs 16 or --max-num-batched-tokens 65536 here.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/frank-archon.env"
: "${FRANK_ARCHON_MAX_SEQS:?set in frank-archon.env}"

usage() {
  cat <<'EOF'
usage: frank-archon.sh fp8|bf16 [--dry-run]
  the shape (--max-num-seqs 8, --max-num-batched-tokens 1024) lives in frank-archon.env
EOF
}

args=(
  --model "$FRANK_ARCHON_MODEL"
  --max-model-len 32768            # the window is not owned by the env file
  --max-num-seqs "$FRANK_ARCHON_MAX_SEQS"
  --max-num-batched-tokens "${FRANK_ARCHON_MAX_BATCHED_TOKENS}"
  --host-pool-mib "$FRANK_ARCHON_HOST_POOL_MIB"
  --gpu-headroom-mib "$FRANK_ARCHON_GPU_HEADROOM_MIB"
)

case "${1:-}" in
  fp8)  args+=(--kv-cache-dtype fp8) ;;
  bf16)
    # bf16 once had --max-num-batched-tokens 65536 ("free throughput"); it was not free.
    echo "bf16: --max-num-seqs 8 from the env file" >&2
    args+=(--kv-cache-dtype bf16)
    ;;
  -h|--help) usage; exit 0 ;;
  *) usage >&2; exit 2 ;;
esac

if [[ "${2:-}" == "--dry-run" ]]; then printf '%s\\n' radiance "${args[@]}"; exit 0; fi
exec radiance "${args[@]}"
"""

# Clean: modes as functions calling one launcher, an indirection through a local name.
CLEAN_FUNCTIONS = """\
#!/bin/bash
. "$(dirname "$0")/frank-archon.env"
SEQS="$FRANK_ARCHON_MAX_SEQS"

launch() {
    local dtype="$1"
    radiance --kv-cache-dtype "$dtype" \\
        --max-num-seqs "$SEQS" \\
        --max-num-batched-tokens="$FRANK_ARCHON_MAX_BATCHED_TOKENS" \\
        --host-pool-mib "$FRANK_ARCHON_HOST_POOL_MIB" \\
        --gpu-headroom-mib "$FRANK_ARCHON_GPU_HEADROOM_MIB"
}

function mode_fp8 {
    launch fp8
}

mode_bf16() {
    # the old bf16 step (--max-num-batched-tokens 65536) was removed
    launch bf16
}

"mode_$1"
"""

# A bf16 arm with its own numbers, in both spellings of a flag.
DIRTY_CASE = """\
#!/usr/bin/env bash
source /home/dank/scripts/frank-archon.env
case "$1" in
  fp8)
    exec radiance --max-num-seqs "$FRANK_ARCHON_MAX_SEQS" \\
      --max-num-batched-tokens "$FRANK_ARCHON_MAX_BATCHED_TOKENS" --kv-cache-dtype fp8
    ;;
  bf16)
    # a wide step is free throughput
    exec radiance --max-num-seqs 16 \\
      --max-num-batched-tokens=65536 --kv-cache-dtype bf16
    ;;
esac
"""

# Functions with a local literal, an override of an owned variable, and a numeric fallback.
DIRTY_FUNCTIONS = """\
#!/usr/bin/env bash
source "$HOME/scripts/frank-archon.env"
launch() {
  radiance --max-num-seqs "$FRANK_ARCHON_MAX_SEQS" --max-num-batched-tokens "$FRANK_ARCHON_MAX_BATCHED_TOKENS" \\
    --host-pool-mib "$FRANK_ARCHON_HOST_POOL_MIB" --gpu-headroom-mib "$FRANK_ARCHON_GPU_HEADROOM_MIB" "$@"
}
serve_long() {
  local mnbt=65536
  radiance --max-num-batched-tokens "$mnbt" --max-num-seqs "$FRANK_ARCHON_MAX_SEQS"
}
serve_wide() {
  FRANK_ARCHON_MAX_SEQS=16 launch --kv-cache-dtype bf16
}
serve_safe() {
  launch --gpu-headroom-mib "${FRANK_ARCHON_GPU_HEADROOM_MIB:-256}"
}
"serve_$1"
"""

# The env file's per-mode alias, used by one arm.
ALIAS_CASE = """\
#!/usr/bin/env bash
source ./frank-archon.env
case $1 in
  fp8) radiance --max-num-seqs "$FRANK_ARCHON_MAX_SEQS" ;;
  bf16) radiance --max-num-seqs "${FRANK_ARCHON_BF16_MAX_SEQS}" ;;
esac
"""

# Per-arm variables and one exec at the bottom; an argv array and a flags string in arms.
ARMS_SET_VARIABLES = """\
#!/usr/bin/env bash
source ./frank-archon.env
MAX_SEQS="$FRANK_ARCHON_MAX_SEQS"
EXTRA=()
case "$1" in
  fp8) DTYPE=fp8 ;;
  bf16) DTYPE=bf16; MAX_SEQS=4 ;;
  long)
    DTYPE=fp8
    EXTRA=(--max-num-batched-tokens 32768)
    ;;
  wide)
    DTYPE=fp8
    WIDE_FLAGS="--host-pool-mib 4096 --max-model-len 65536"
    ;;
esac
exec radiance --kv-cache-dtype "$DTYPE" --max-num-seqs "$MAX_SEQS" "${EXTRA[@]}" $WIDE_FLAGS
"""

# A nested case inside a mode arm, and a mode that computes its value.
NESTED = """\
#!/usr/bin/env bash
source ./frank-archon.env
case "$1" in
  bf16)
    case "$2" in
      --dry-run) DRY=1 ;;
      *) DRY=0 ;;
    esac
    radiance --max-num-seqs $((FRANK_ARCHON_MAX_SEQS / 2)) --host-pool-mib 7580
    ;;
  fp8) radiance --max-num-seqs "$FRANK_ARCHON_MAX_SEQS" ;;
esac
"""


def line_of(text: str, needle: str) -> int:
    """The 1-based line holding needle (which must appear once)."""
    hits = [n for n, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(hits) == 1, f"{needle!r} appears on lines {hits}"
    return hits[0]


# (script, env, [(kind, needle on the finding's line, mode, flag)])
CASES = [
    pytest.param(CLEAN_CASE, ENV, [], id="clean case arms, comments and usage texts"),
    pytest.param(CLEAN_FUNCTIONS, ENV, [], id="clean functions and an indirection"),
    pytest.param(
        DIRTY_CASE, ENV,
        [("literal", "--max-num-seqs 16", "bf16", "max-num-seqs"),
         ("literal", "--max-num-batched-tokens=65536", "bf16", "max-num-batched-tokens")],
        id="case arm literals",
    ),
    pytest.param(
        DIRTY_FUNCTIONS, ENV,
        [("literal", "local mnbt=65536", "serve_long", "max-num-batched-tokens"),
         ("override", "FRANK_ARCHON_MAX_SEQS=16", "serve_wide", "max-num-seqs"),
         ("default", ":-256}", "serve_safe", "gpu-headroom-mib")],
        id="function literal, override, fallback",
    ),
    pytest.param(
        ALIAS_CASE, ENV_WITH_ALIAS,
        [("alias", "${FRANK_ARCHON_BF16_MAX_SEQS}", "bf16", "max-num-seqs")],
        id="alias used by an arm",
    ),
    pytest.param(
        ARMS_SET_VARIABLES, ENV,
        [("literal", "MAX_SEQS=4", "bf16", "max-num-seqs"),
         ("literal", "EXTRA=(--max-num-batched-tokens 32768)", "long", "max-num-batched-tokens"),
         ("literal", 'WIDE_FLAGS="--host-pool-mib 4096', "wide", "host-pool-mib")],
        id="arms set the variables of one exec",
    ),
    pytest.param(
        NESTED, ENV,
        [("unowned", "$((FRANK_ARCHON_MAX_SEQS / 2))", "bf16", "max-num-seqs"),
         ("literal", "--host-pool-mib 7580", "bf16", "host-pool-mib")],
        id="nested case, computed value",
    ),
]


@pytest.mark.parametrize(("script", "env", "expected"), CASES)
def test_findings(script: str, env: str, expected: list[tuple[str, str, str, str]]) -> None:
    check = check_script(script, [EnvFile("scripts/frank-archon.env", env)], script_name="scripts/frank-archon.sh")
    got = {(f.kind, f.line, f.mode, f.flag) for f in check.findings if f.file == "scripts/frank-archon.sh"}
    want = {(kind, line_of(script, needle), mode, flag) for kind, needle, mode, flag in expected}
    assert got == want
    assert check.ok is (not expected)
    for finding in check.findings:
        assert finding.text and finding.message


def test_alias_in_the_env_file_is_reported_with_its_line() -> None:
    check = check_script(ALIAS_CASE, [EnvFile("scripts/frank-archon.env", ENV_WITH_ALIAS)], script_name="s.sh")
    env_findings = [f for f in check.findings if f.file == "scripts/frank-archon.env"]
    assert [(f.kind, f.line, f.variable, f.mode) for f in env_findings] == [
        ("alias", line_of(ENV_WITH_ALIAS, "FRANK_ARCHON_BF16_MAX_SEQS"), "FRANK_ARCHON_BF16_MAX_SEQS", None)
    ]


def test_owned_variables_are_read_off_the_env_file() -> None:
    # Owned: the env file's variables the script passes to each shaped flag, with their values and lines.
    check = check_script(CLEAN_CASE, [EnvFile("scripts/frank-archon.env", ENV, "/s/frank-archon.env")],
                         script_name="s.sh", script_path="/s/s.sh")
    assert {(o.name, o.value, o.line) for o in check.owned} == {
        ("FRANK_ARCHON_MAX_SEQS", "8", 2),
        ("FRANK_ARCHON_MAX_BATCHED_TOKENS", "1024", 3),
        ("FRANK_ARCHON_HOST_POOL_MIB", "7580", 4),
        ("FRANK_ARCHON_GPU_HEADROOM_MIB", "96", 5),
    }
    assert check.sources_env_file is True and check.handles_dry_run is True


def test_modes_are_case_arms_and_functions() -> None:
    check = check_script(CLEAN_CASE, [EnvFile("e", ENV)], script_name="s.sh")
    assert [(m.name, m.kind) for m in check.modes] == [
        ("usage", "function"), ("fp8", "case arm"), ("bf16", "case arm"), ("-h|--help", "case arm"),
        ("*", "case arm"), ("if [[ ${2:-} == --dry-run ]]", "if branch"),
    ]
    functions = check_script(CLEAN_FUNCTIONS, [EnvFile("e", ENV)], script_name="s.sh")
    assert [(m.name, m.first_line, m.last_line) for m in functions.modes] == [
        ("launch", 5, 12), ("mode_fp8", 14, 16), ("mode_bf16", 18, 21),
    ]


def test_nested_arm_path() -> None:
    check = check_script(NESTED, [EnvFile("e", ENV)], script_name="s.sh")
    assert "bf16 > --dry-run" in [m.path for m in check.modes]


def test_missing_owned_variable_and_unsourced_env_are_noted() -> None:
    check = check_script(DIRTY_CASE, [EnvFile("other.env", "FRANK_ARCHON_MAX_SEQS=8\n", "/s/other.env")],
                         script_name="s.sh", script_path="/s/s.sh")
    assert any("does not define FRANK_ARCHON_MAX_BATCHED_TOKENS" in n for n in check.notes)
    assert any("never names other.env" in n for n in check.notes)


def test_tokenizer_keeps_quotes_expansions_and_drops_comments() -> None:
    text = 'a="x # y" $(echo ")") ${v:-#} # gone\nb=\'1\' \\\n  c  # gone too\n'
    words = [(t.text, t.line) for t in tokenize(text) if t.kind == "word"]
    assert words == [('a="x # y"', 1), ('$(echo ")")', 1), ("${v:-#}", 1), ("b='1'", 2), ("c", 3)]


@pytest.mark.parametrize(
    ("script", "handles"),
    [
        (CLEAN_CASE, True),
        ('case "$2" in --dry-run) echo;; esac', True),
        ("# pass --dry-run to print argv\nexec radiance\n", False),  # a comment is not code
        ("exec radiance --max-num-seqs 2\n", False),
    ],
)
def test_handles_dry_run(script: str, handles: bool) -> None:
    assert handles_dry_run(script) is handles
