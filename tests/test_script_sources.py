"""scripts.py's LocalScripts: the ScriptSource of this machine (RemoteScripts: tests/remote/test_scripts.py).

A real script on disk, run for real: its dry run's argv comes back as bytes with its exit status.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from radiance_mcp.core.constants import SCRIPT_CAP_BYTES
from radiance_mcp.core.errors import GuardRailError, InputError, SourceError
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.sources.scripts import LocalScripts, RemoteScripts, ScriptRef, runnable_script, script_source

SCRIPT = """\
#!/usr/bin/env bash
# launch.sh: two modes, argv one per line on --dry-run
case "$1" in
  steady) argv=(serve --max-num-seqs 4 --max-num-batched-tokens 2048) ;;
  burst)  argv=(serve --max-num-seqs 4 --max-num-batched-tokens 16384) ;;
  *) echo "no mode $1" >&2; exit 3 ;;
esac
[ "$2" = --dry-run ] && printf '%s\\n' "${argv[@]}" && exit 0
exec "${argv[@]}"
"""


def fleet_for(tmp_path: Path) -> Fleet:
    return Fleet.model_validate({
        "server": {"log_roots": [str(tmp_path)]},
        "hosts": {"gpu-box-2": {"log_roots": ["/srv/llm"]}},
        "services": {"local-qwen": {"serve_script": str(tmp_path / "launch.sh")},
                     "far-qwen": {"host": "gpu-box-2", "serve_script": "/srv/llm/launch.sh"}},
    })


@pytest.mark.slow
async def test_local_reads_and_runs_a_real_script(tmp_path: Path) -> None:
    (tmp_path / "launch.sh").write_text(SCRIPT)
    runtime = Runtime(fleet_for(tmp_path))
    source, ref = runnable_script(runtime, service="local-qwen", script=None, host=None)
    assert isinstance(source, LocalScripts) and source.host is None
    (script,) = await source.read([ref])
    assert script is not None and script.label == str(tmp_path / "launch.sh") and "burst)" in script.text
    steady, burst = await source.dry_runs(script, ("steady", "burst"), timeout_s=20)
    assert steady.stdout == b"serve\n--max-num-seqs\n4\n--max-num-batched-tokens\n2048\n"
    assert burst.stdout.endswith(b"16384\n") and (steady.exit_status, burst.exit_status) == (0, 0)
    assert steady.command[-2:] == ["steady", "--dry-run"]  # no exec bit: run under bash, as an argv list
    with pytest.raises(SourceError, match="exited 3; stderr ends: 'no mode idle'"):
        await source.dry_runs(script, ("idle",), timeout_s=20)


async def test_local_reads_an_optional_file_as_none_and_caps_the_rest(tmp_path: Path) -> None:
    runtime = Runtime(fleet_for(tmp_path))
    (tmp_path / "huge.env").write_bytes(b"A=1\n" * (SCRIPT_CAP_BYTES // 4 + 1))
    missing = ScriptRef("env_file", str(tmp_path / "launch.env"), optional=True)
    assert await LocalScripts(runtime).read([missing]) == [None]
    with pytest.raises(SourceError, match=r"env_file=.*huge\.env' is over 1,024 KiB"):
        await LocalScripts(runtime).read([ScriptRef("env_file", str(tmp_path / "huge.env"))])
    with pytest.raises(InputError, match="outside the allowed log roots"):
        await LocalScripts(runtime).read([ScriptRef("script", "/etc/passwd")])


def test_the_source_follows_the_service_to_its_host(tmp_path: Path) -> None:
    runtime = Runtime(fleet_for(tmp_path))
    assert isinstance(script_source(runtime, "far-qwen", None), RemoteScripts)
    assert isinstance(script_source(runtime, "local-qwen", None), LocalScripts)
    source, ref = runnable_script(runtime, service=None, script="/srv/llm/launch.sh", host="gpu-box-2")
    assert (source.host, ref.argument, ref.configured) == ("gpu-box-2", "services.far-qwen.serve_script", True)
    with pytest.raises(GuardRailError, match="not the serve_script of any service of that host"):
        runnable_script(runtime, service=None, script="/srv/llm/other.sh", host="gpu-box-2")
