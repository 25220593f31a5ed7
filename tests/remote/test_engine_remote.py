"""vLLM, SGLang and llama.cpp logs read on a host over SSH, against both real SSH servers.

The oracle is the local reader: the boot read over SSH (only the lines holding the engine's
words cross the wire) must equal the same boot of the same text read whole on this machine
(engines.read_engine_boot): its index, boots, line span, every figure with its lines, the
refusals and every phrase hit, or the same error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from ssh_hosts import LoopbackHost

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.engines import EngineName, read_engine_boot
from radiance_mcp.core.errors import InputError, LedgerError, SourceError
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.sources.engine_logs import engine_boot, read_ledger, remote_boot
from radiance_mcp.sources.ledgers import PodmanLogsSource, RemoteFileSource
from radiance_mcp.sources.remote import SSHPool
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
ENGINE_OF: dict[str, EngineName] = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp"}
RECORDED = sorted(p.relative_to(LEDGERS).as_posix() for p in LEDGERS.glob("*/*.log"))


def facts(view: Boot) -> tuple[Any, ...]:
    """What a reader of the view sees, its source's name aside: boot, span, figures with lines, refusals, hits."""
    return (view.engine, view.index, view.boots_seen, view.first_line, view.last_line, view.ranks, view.refusals,
            dict(view.settings), [(h.key, h.line, h.rank) for h in view.hits])


def text_of(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")


def on_host(host: LoopbackHost, pool: SSHPool, text: str, name: str | None = None) -> RemoteFileSource:
    path = host.logs / (name or f"engine-{abs(hash(text))}.log")
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return RemoteFileSource(host.target(), str(path), pool, (str(host.logs),))


async def same_as_local(source: RemoteFileSource | PodmanLogsSource, text: str, engine: EngineName | None,
                        boot: int, named: EngineName) -> Boot | None:
    """The remote read equals the local read of text (or raises the same error, its source's name aside)."""
    try:
        local = read_engine_boot(text, source=source.label, engine=named, boot=boot)
    except LedgerError as exc:
        with pytest.raises(LedgerError) as remote_error:
            await remote_boot(source, engine, boot)
        assert str(remote_error.value) == str(exc)
        return None
    remote = await remote_boot(source, engine, boot)
    assert remote is not None
    assert facts(remote) == facts(local)
    assert remote.origin == "host" and remote.source == source.label
    return remote


@pytest.mark.parametrize("recorded", RECORDED)
async def test_every_recorded_log_reads_on_a_host_as_it_does_here(asyncssh_host: LoopbackHost, pool: SSHPool,
                                                                  recorded: str) -> None:
    """Boots -1, -2 and 1, named engine, and (boot -1) unnamed: the engine is told from the lines the host sent.

    The boots share one connection and file (an engine read keeps no state between reads); the
    SSH server does not change what the dialect reads, so the other server reads the two-boot logs below.
    """
    text = text_of(LEDGERS / recorded)
    engine = ENGINE_OF[recorded.split("/")[0]]
    source = on_host(asyncssh_host, pool, text, recorded.replace("/", "-"))
    for boot in (-1, -2, 1):
        view = await same_as_local(source, text, engine, boot, engine)
        if boot == -1:
            assert view is not None  # every recorded log has a newest boot
            told = await remote_boot(source, None, -1)
            assert told is not None and facts(told) == facts(view)


# A start-up's first line, as each engine prints it, in layouts the recordings do not show (tabs, other
# prefixes, another version); the recorded excerpts mostly begin after it.
MARKER = {
    "vllm": "(APIServer pid=4242) INFO 12-01 10:00:00 [api_server.py:1]\tvLLM API server version 0.10.1\n",
    "sglang": "[2026-12-01 10:00:00] server_args=ServerArgs(model_path='/m/x', tp_size=4, chunked_prefill_size=8192)\n",
    "llama.cpp": "build: 6012 (a1b2c3d4) with cc (GCC) 14.2 for x86_64-pc-linux-gnu\n",
}


def two_boots(engine: EngineName, first: str, second: str, filler: str) -> str:
    """Two start-ups of one engine with request lines between and after, in a layout the recordings lack."""
    between = "".join(filler.format(n=n) for n in range(40))
    return (MARKER[engine] + first.rstrip("\n") + "\n" + between + MARKER[engine] + second.rstrip("\n") + "\n"
            + between)


TWO_BOOTS = [
    ("vllm", "vllm/v0.6_llama3.1-8b_20k.log", "vllm/v1_fp8_100k.log",
     'INFO 01-02 03:04:{n:02d} api_server.py:1] 10.0.0.{n}:5{n:03d} - "POST /v1/chat/completions HTTP/1.1" 200\n'),
    ("sglang", "sglang/tp8_load_begin.log", "sglang/dp4_tp4_ep4_pool.log",
     "[2026-01-02 03:04:{n:02d}] Decode batch. #running-req: {n}, #token: {n}00, token usage: 0.0{n}, gen throughput "
     "(token/s): 41.0\n"),
    ("llama.cpp", "llamacpp/b4701_llamasharp_kv_self.log", "llamacpp/b45xx_server_8_slots.log",
     "srv  log_server_r: request: POST /completion 192.168.1.{n} 200\r\n"),
]


@pytest.mark.parametrize(("engine", "older", "newer", "filler"), TWO_BOOTS)
async def test_two_boots_each_read_from_either_end(ssh_host: LoopbackHost, pool: SSHPool, engine: EngineName,
                                                   older: str, newer: str, filler: str) -> None:
    """Boots -3 to 3 through one connection (an engine read keeps no state between reads)."""
    text = two_boots(engine, text_of(LEDGERS / older), text_of(LEDGERS / newer), filler)
    source = on_host(ssh_host, pool, text)
    for boot in (-1, -2, -3, 1, 2, 3):
        view = await same_as_local(source, text, engine, boot, engine)
        assert (view is not None) == (boot in (-2, -1, 1, 2)), boot  # two boots, told apart by their first lines


async def test_a_container_log_reads_as_the_file_does(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    text = text_of(LEDGERS / "sglang/heldout_tp4_qwen3-235b-fp8.log")
    ssh_host.write_container("sglang-qwen", text)
    source = PodmanLogsSource(ssh_host.target(), "sglang-qwen", pool)
    view = await same_as_local(source, text, "sglang", -1, "sglang")
    assert view is not None and view.source == "testhost:podman logs sglang-qwen"
    argv = (ssh_host.root / "containers" / "argv.log").read_text().splitlines()
    assert argv[-1] == "logs -- sglang-qwen"


async def test_a_container_that_is_not_there_is_podmans_own_error(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    source = PodmanLogsSource(ssh_host.target(), "no-such-vllm", pool)
    with pytest.raises(SourceError, match=r"`podman logs no-such-vllm` failed on host testhost: it exited with "
                                          r"status 125: .*no such container.*podman ps -a"):
        await remote_boot(source, "vllm", -1)


async def test_a_missing_file_is_named_with_its_host(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    source = RemoteFileSource(ssh_host.target(), str(ssh_host.logs / "vllm-gone.log"), pool, (str(ssh_host.logs),))
    with pytest.raises(SourceError, match=r"vllm-gone.log: no such file on host testhost"):
        await remote_boot(source, "vllm", -1)


async def test_a_symlink_leading_out_of_the_roots_is_refused_on_the_host(ssh_host: LoopbackHost,
                                                                         pool: SSHPool) -> None:
    source = RemoteFileSource(ssh_host.target(), str(ssh_host.logs / "link-out.log"), pool, (str(ssh_host.logs),))
    with pytest.raises(InputError, match=r"real path on host testhost .* lies outside the allowed log roots"):
        await remote_boot(source, None, -1)
    ssh_host.assert_untouched()


async def test_an_empty_log_and_a_log_of_no_engine_say_so(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    empty = on_host(ssh_host, pool, "")
    with pytest.raises(LedgerError, match="the log is empty"):
        await remote_boot(empty, "llama.cpp", -1)
    noise = "GET /healthz 200\n" * 50
    quiet = on_host(ssh_host, pool, noise)
    with pytest.raises(LedgerError) as local:
        read_engine_boot(noise, source=quiet.label, engine="sglang")
    with pytest.raises(LedgerError) as remote_error:
        await remote_boot(quiet, "sglang", -1)
    assert str(remote_error.value) == str(local.value) and "lines 1-50" in str(local.value)


HOSTILE_NAMES = ["vllm $(touch pwned).log", "vllm`touch pwned`.log", "a'b\"c;touch pwned;.log",
                 "-e touch.log", "*.log", "sp  aces .log"]


async def test_hostile_file_names_are_read_as_names(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    text = text_of(LEDGERS / "vllm/heldout_v1_a40_53k.log")
    for name in HOSTILE_NAMES:
        source = on_host(ssh_host, pool, text, name)
        try:
            await same_as_local(source, text, "vllm", -1, "vllm")
            ssh_host.assert_untouched()
        finally:  # the host's logs are shared: a file named '*.log' would be what another test's glob-like name finds
            (ssh_host.logs / name).unlink()


async def test_a_name_with_a_control_character_is_refused_before_any_command(ssh_host: LoopbackHost,
                                                                             pool: SSHPool) -> None:
    # In the fleet file: refused as the file is read (issue 22), as a local path there is; as an argument, by the
    # host path's own rule before any command.
    with pytest.raises(ValidationError, match="control character"):
        ssh_host.fleet(services={"v": {"host": "testhost", "log": f"{ssh_host.logs}/a\nb.log", "engine": "vllm"}})
    with pytest.raises(InputError, match="control characters"):
        await read_ledger(Runtime(ssh_host.fleet(), ssh_pool=pool),
                          LedgerRef(host="testhost", log=f"{ssh_host.logs}/a\nb.log"))
    assert pool.transfer.commands == 0


async def test_a_path_outside_the_roots_is_refused_before_any_command(ssh_host: LoopbackHost,
                                                                      pool: SSHPool) -> None:
    runtime = Runtime(ssh_host.fleet(), ssh_pool=pool)
    for path in ("/etc/passwd", f"{ssh_host.logs}/../canary", "relative.log"):
        with pytest.raises(InputError):
            await read_ledger(runtime, LedgerRef(host="testhost", log=path))
    assert pool.transfer.commands == 0


async def test_an_unnamed_engine_on_a_host_is_told_after_radiances_reader_finds_nothing(
        ssh_host: LoopbackHost, pool: SSHPool, example_text: str) -> None:
    """host + log (no engine in the config): radiance's reader first, then the engine's lines; radiance's
    own ledger costs one command, as before."""
    vllm = on_host(ssh_host, pool, text_of(LEDGERS / "vllm/heldout_v1_a40_53k.log"))
    radiance = on_host(ssh_host, pool, example_text)
    runtime = Runtime(ssh_host.fleet(), ssh_pool=pool)
    view = await read_ledger(runtime, LedgerRef(host="testhost", log=vllm.path))
    assert view.engine == "vllm" and view.origin == "host"
    assert pool.transfer.commands == 2  # radiance's reader found no ledger; the engine read told vLLM
    assert await engine_boot(runtime, LedgerRef(host="testhost", log=radiance.path)) is None
    boot = await read_ledger(runtime, LedgerRef(host="testhost", log=radiance.path))
    assert boot.engine == "radiance" and boot.origin == "host"
    assert pool.transfer.commands == 3
    noise = on_host(ssh_host, pool, "GET /healthz 200\n" * 5)
    with pytest.raises(LedgerError, match="no radiance ledger phrase .* name the service's engine"):
        await read_ledger(runtime, LedgerRef(host="testhost", log=noise.path))


def test_the_engine_read_command_holds_fixed_words_and_quoted_names() -> None:
    """The grep words are the dialects' own (settings of ours); the tool's name and roots are checked, then quoted."""
    import shlex

    from radiance_mcp.core.engines import engine_words
    from radiance_mcp.sources.remote import EngineRequest, build_engine_command

    path = "/var/log/vllm/a b;c$(d)`e`'f\"g.log"
    command = build_engine_command(EngineRequest("file", path, "h:x", ("/var/log/vllm",), "vllm"),
                                   nonce="0123456789abcdef0123456789abcdef", timeout_s=30, cap_bytes=1 << 20)
    (call,) = [shlex.split(line) for line in command.split("\n") if line.startswith("read_engine_file ")]
    assert call == ["read_engine_file", "0", path, "/var/log/vllm"]
    words = engine_words("vllm")
    assert "Initializing" in words and "GPU KV cache size:" not in words and "KV cache size:" in words
    assert f"words={shlex.quote('|'.join(words))}" in command and "lines_cap=1048576" in command
    assert "\n# " not in command and command.endswith("\ncontrol_line Z\n} < /dev/null\n")
    container = build_engine_command(EngineRequest("podman", "sgl-0", "h:podman logs sgl-0", engine=None),
                                     nonce="0123456789abcdef0123456789abcdef", timeout_s=30, cap_bytes=1 << 20)
    assert "\nread_engine_podman 0 sgl-0\n" in container and "server_args=" in container
    assert "radiance boot" in container  # an unnamed engine: radiance's words too, to tell it from the lines
    with pytest.raises(InputError):
        build_engine_command(EngineRequest("podman", "-rm", "x"), nonce="0123456789abcdef", timeout_s=1, cap_bytes=1)
