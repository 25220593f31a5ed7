"""The simulated radiance over HTTP: an OpenAI-compatible server on 127.0.0.1, port 0.

``SimEndpoint`` boots an ``EngineModel`` (appending its ledger to ``ledger_path`` when given),
then serves ``/v1/completions``, ``/v1/chat/completions`` (both with SSE when ``stream`` is
true), ``/v1/models`` and ``/health`` with starlette on uvicorn. The decisions are
``serving.plan_request``'s; this module adds the seats (at most --max-num-seqs requests are
served at once, the others queue), the prefix cache and the simulated clock: each phase sleeps
its simulated seconds times ``time_scale``. ``timings`` report the simulated clock, not the
wall clock. A shape whose boot is refused writes its ledger and serves nothing (connections to
its port are refused), as radiance does after ``E startup stopped``.

    async with SimEndpoint(Shape(), time_scale=0.001) as ep:
        httpx.post(f"{ep.url}/v1/completions", json={...})
        ep.behaviour.timings = "null_rates"   # live
        await ep.restart()                      # a new engine process; the prefix cache survives
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from radiance_mcp.core.errors import InputError
from radiance_mcp.sim.engine import EngineModel, Shape
from radiance_mcp.sim.serving import (
    GATHER_WAIT_S,
    Behaviour,
    ErrorAnswer,
    Plan,
    PrefixCache,
    decode_tokens_per_s,
    finish_reason,
    head_line,
    pieces,
    plan_request,
    prefill_s,
    timings,
)
from radiance_mcp.sim.tokenizer import count_tokens

MAX_BODY_BYTES = 16 * 1024 * 1024
"""A request body over this is refused by the server (a 200k-token prompt is about 0.6 MB)."""


@dataclass(frozen=True)
class RequestRecord:
    """One request the endpoint answered (refusals and failures included)."""

    id: int
    boot: int
    """Which boot of the endpoint served it (1 = first start, +1 per restart)."""
    path: str
    status: int
    prompt_tokens: int | None
    cached_tokens: int = 0
    prefill_tokens: int = 0
    """Prompt tokens paid for in prefill (not read from the prefix cache)."""
    max_tokens: int | None = None
    completion_tokens: int = 0
    finish_reason: str | None = None
    refusal: str | None = None
    answer_head: str | None = None
    """The first line of the prompt as the model saw it (what it answers with)."""
    thinking: bool = False
    stream: bool = False
    truncated: bool = False
    queued: bool = False
    """True when every seat was taken on arrival and the request waited."""
    prefill_s: float = 0.0
    decode_s: float = 0.0
    """Simulated seconds (wall time is these times time_scale)."""

    @property
    def cached(self) -> bool:
        return self.cached_tokens > 0


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers (several run in one process and the host app owns
    signals), told to stop rather than polling for it: uvicorn's loop looks every 0.1 s, which
    every stop and redeploy of a simulated engine waited for. (Its once-a-second tick only
    refreshes the Date header, which a simulator's answers need not keep current.) Its shutdown
    likewise sleeps a fixed 0.1 s and then looks every 0.1 s for connections to close; ours looks
    every 5 ms (a fleet of an eval scenario stopped in 0.13 s, now in about 0.01 s)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stop = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def main_loop(self) -> None:
        await self.on_tick(0)
        await self._stop.wait()

    def stop(self) -> None:
        self.should_exit = True
        self._stop.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's graceful shutdown (no lifespan: it is off), looking every 5 ms instead of 0.1 s."""
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        state, loop = self.server_state, asyncio.get_running_loop()
        deadline = loop.time() + (self.config.timeout_graceful_shutdown or 0)
        while (state.connections or state.tasks) and loop.time() < deadline:
            await asyncio.sleep(0.005)
        for task in state.tasks:
            task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")


@dataclass
class _Process:
    """One engine process: its server task and its seats."""

    server: _QuietServer
    task: asyncio.Task[None]
    seats: asyncio.Semaphore


@dataclass
class SimEndpoint:
    """A simulated radiance serving one shape on 127.0.0.1 (see the module docstring)."""

    shape: Shape = field(default_factory=Shape)
    behaviour: Behaviour = field(default_factory=Behaviour)
    time_scale: float = 1.0
    """Wall seconds per simulated second (0.001 in tests: a 22 s prefill takes 22 ms)."""
    ledger_path: Path | None = None
    """Where each boot's ledger is appended (the log file beside the serve script); None: nowhere."""
    requests: list[RequestRecord] = field(default_factory=list)
    peak_in_flight: int = 0
    """The most requests served at once so far (never above --max-num-seqs)."""

    def __post_init__(self) -> None:
        if self.time_scale < 0:
            raise InputError(f"time_scale={self.time_scale} must not be negative")
        self.model = EngineModel(self.shape)
        self.prefix_cache = PrefixCache(self.model.boots.rate_bytes_per_token)
        self.port: int | None = None
        self.boots = 0
        self._process: _Process | None = None
        self._reserved: socket.socket | None = None
        self._closing = asyncio.Event()
        self._ids = itertools.count(1)
        self._in_flight = 0
        self._arrivals = asyncio.Condition()
        self._decoding = 0

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise InputError("the endpoint has not been started: use 'async with SimEndpoint(...)' or start()")
        return f"http://127.0.0.1:{self.port}"

    @property
    def serving(self) -> bool:
        """False before start, after stop, and while the current shape's boot is refused."""
        return self._process is not None

    async def start(self) -> SimEndpoint:
        """Boot: append the ledger, then serve unless the boot is refused."""
        if self._process is not None:
            return self
        sock = self._bind()
        self.boots += 1
        address = f"127.0.0.1:{self.port}"
        if self.ledger_path is not None:
            self.ledger_path.parent.mkdir(parents=True, exist_ok=True)
            with self.ledger_path.open("a", encoding="utf-8") as log:
                log.write(self.model.ledger_text(address=address))
        if self.model.refused:
            self._reserved = sock  # bound, not listening: the port stays ours and connections are refused
            return self
        self._closing = asyncio.Event()
        config = uvicorn.Config(
            self._app(), log_level="warning", access_log=False, lifespan="off", ws="none", http="h11",
            timeout_graceful_shutdown=2,
        )
        server = _QuietServer(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()
                raise InputError(f"the simulated endpoint on {address} stopped while starting")
            await asyncio.sleep(0.005)
        self._process = _Process(server, task, asyncio.Semaphore(self.shape.seqs))
        return self

    async def stop(self) -> None:
        """Stop serving; requests that hang are released with HTTP 503."""
        self._closing.set()
        if self._reserved is not None:
            self._reserved.close()
            self._reserved = None
        process, self._process = self._process, None
        if process is not None:
            process.server.stop()
            await process.task

    async def restart(self, shape: Shape | None = None) -> None:
        """A new engine process on the same port (optionally a new shape: a redeploy).

        The prefix cache survives (it is on disk); the seats and anything in flight do not.
        """
        await self.stop()
        if shape is not None:
            self.shape = shape
            self.model = EngineModel(shape)
        await self.start()

    async def __aenter__(self) -> SimEndpoint:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", self.port or 0))
        except OSError as exc:
            sock.close()
            raise InputError(f"cannot bind 127.0.0.1:{self.port or 0} for the simulated endpoint: {exc}") from exc
        self.port = sock.getsockname()[1]
        return sock

    # -- HTTP -----------------------------------------------------------------------------

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/completions", self._completions, methods=["POST"]),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/health", self._health, methods=["GET"]),
            ],
            max_body_size=MAX_BODY_BYTES,
        )

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def _models(self, request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.shape.model.name,
                        "object": "model",
                        "owned_by": "radiance",
                        "max_model_len": self.shape.max_model_len,
                    }
                ],
            }
        )

    async def _completions(self, request: Request) -> Response:
        return await self._generate(request, "completion")

    async def _chat(self, request: Request) -> Response:
        return await self._generate(request, "chat")

    async def _generate(self, request: Request, kind: Literal["completion", "chat"]) -> Response:
        number = next(self._ids)
        boot = self.boots
        path = request.url.path
        try:
            body = json.loads(await request.body())
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as exc:
            return self._refuse(number, boot, path, ErrorAnswer(400, f"invalid JSON body: {exc}"))
        behaviour = self.behaviour
        if behaviour.fail_status is not None:
            refusal = ErrorAnswer(behaviour.fail_status, "simulated engine failure")
            return self._refuse(number, boot, path, refusal)
        if behaviour.hang:
            await self._closing.wait()
            return self._refuse(number, boot, path, ErrorAnswer(503, "the engine stopped while the request hung"))
        plan = plan_request(body, kind, self.model.boots, behaviour)
        if isinstance(plan, ErrorAnswer):
            return self._refuse(number, boot, path, plan)
        run = _Run(self, number, boot, path, plan)
        if plan.stream:
            return StreamingResponse(run.stream(), media_type="text/event-stream")
        return JSONResponse(await run.whole())

    def _refuse(self, number: int, boot: int, path: str, refusal: ErrorAnswer) -> Response:
        self.requests.append(
            RequestRecord(id=number, boot=boot, path=path, status=refusal.status, prompt_tokens=refusal.prompt_tokens,
                          refusal=refusal.message)
        )
        return JSONResponse(refusal.body(), status_code=refusal.status)

    async def _gather(self) -> None:
        """Behaviour.gather: a seated request waits until that many are in flight (or GATHER_WAIT_S pass)."""
        want = self.behaviour.gather
        if want <= 0:
            return
        async with self._arrivals:
            self._arrivals.notify_all()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrivals.wait_for(lambda: self._in_flight >= want), GATHER_WAIT_S)

    async def _sleep(self, simulated_s: float) -> None:
        await asyncio.sleep(simulated_s * self.time_scale)


class _Run:
    """One accepted request being served: a seat, prefill, then decode."""

    def __init__(self, endpoint: SimEndpoint, number: int, boot: int, path: str, plan: Plan) -> None:
        self.ep, self.number, self.boot, self.path, self.plan = endpoint, number, boot, path, plan
        self.created = int(time.time())
        self.model_id = endpoint.shape.model.name
        self.reasoning, self.content = pieces(plan)
        self.cached = 0
        self.prefill = 0.0
        self.decode = 0.0
        self.queued = False

    @contextlib.asynccontextmanager
    async def _seat(self) -> AsyncIterator[None]:
        process = self.ep._process
        if process is None:  # pragma: no cover - a request cannot arrive at a stopped server
            raise RuntimeError("no engine process")
        self.queued = process.seats.locked()
        async with process.seats:
            self.ep._in_flight += 1
            self.ep.peak_in_flight = max(self.ep.peak_in_flight, self.ep._in_flight)
            try:
                await self.ep._gather()
                yield
            finally:
                self.ep._in_flight -= 1

    async def _prefill(self) -> None:
        plan, cache = self.plan, self.ep.prefix_cache
        if self.ep.behaviour.prefix_cache:
            held = cache.cached_chars(plan.prompt)
            self.cached = min(plan.kept_tokens, count_tokens(plan.prompt[:held]))
        self.prefill = prefill_s(self.cached, plan.kept_tokens - self.cached)
        await self.ep._sleep(self.prefill)
        if self.ep.behaviour.prefix_cache:
            cache.store(plan.prompt)

    def _token_interval_s(self) -> float:
        rate = decode_tokens_per_s(self.ep.shape.kv_cache_dtype, self.ep._decoding)
        return 1.0 / rate

    def _timings(self) -> dict[str, Any] | None:
        return timings(
            self.ep.behaviour.timings,
            prompt_tokens=self.plan.prompt_tokens,
            cached_tokens=self.cached,
            prefill=self.prefill,
            generated=self.plan.generate_tokens,
            decode=self.decode,
        )

    def _usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.plan.prompt_tokens,
            "completion_tokens": self.plan.generate_tokens,
            "total_tokens": self.plan.prompt_tokens + self.plan.generate_tokens,
        }

    def _record(self, status: int) -> None:
        plan = self.plan
        self.ep.requests.append(
            RequestRecord(
                id=self.number,
                boot=self.boot,
                path=self.path,
                status=status,
                prompt_tokens=plan.prompt_tokens,
                cached_tokens=self.cached,
                prefill_tokens=plan.kept_tokens - self.cached,
                max_tokens=plan.max_tokens,
                completion_tokens=plan.generate_tokens,
                finish_reason=finish_reason(plan),
                answer_head=head_line(plan.prompt),
                thinking=plan.thinking,
                stream=plan.stream,
                truncated=plan.truncated,
                queued=self.queued,
                prefill_s=self.prefill,
                decode_s=self.decode,
            )
        )

    def _body(self) -> dict[str, Any]:
        plan, reason = self.plan, finish_reason(self.plan)
        content = "".join(self.content)
        body: dict[str, Any]
        if plan.kind == "completion":
            body = {
                "id": f"cmpl-{self.number}",
                "object": "text_completion",
                "created": self.created,
                "model": self.model_id,
                "choices": [{"index": 0, "text": content, "logprobs": None, "finish_reason": reason}],
            }
        else:
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if plan.thinking:
                message["reasoning_content"] = "".join(self.reasoning)
            body = {
                "id": f"chatcmpl-{self.number}",
                "object": "chat.completion",
                "created": self.created,
                "model": self.model_id,
                "choices": [{"index": 0, "message": message, "finish_reason": reason}],
            }
        body["usage"] = self._usage()
        found = self._timings()
        if found is not None:
            body["timings"] = found
        return body

    async def whole(self) -> dict[str, Any]:
        async with self._seat():
            await self._prefill()
            self.ep._decoding += 1
            try:
                self.decode = self.plan.generate_tokens * self._token_interval_s()
                await self.ep._sleep(self.decode)
            finally:
                self.ep._decoding -= 1
        self._record(200)
        return self._body()

    def _chunk(self, piece: str | None, field_name: str, reason: str | None) -> dict[str, Any]:
        if self.plan.kind == "completion":
            choice: dict[str, Any] = {"index": 0, "text": piece or "", "logprobs": None, "finish_reason": reason}
            return {"id": f"cmpl-{self.number}", "object": "text_completion", "created": self.created,
                    "model": self.model_id, "choices": [choice]}
        delta = {} if piece is None else {field_name: piece}
        return {"id": f"chatcmpl-{self.number}", "object": "chat.completion.chunk", "created": self.created,
                "model": self.model_id, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}

    async def stream(self) -> AsyncIterator[str]:
        status = 499  # the client went away before the end
        try:
            async with self._seat():
                await self._prefill()
                self.ep._decoding += 1
                try:
                    interval = self._token_interval_s()
                    tokens = [(p, "reasoning_content") for p in self.reasoning]
                    tokens += [(p, "content") for p in self.content]
                    for piece, field_name in tokens:
                        await self.ep._sleep(interval)
                        self.decode += interval
                        yield _sse(self._chunk(piece, field_name, None))
                finally:
                    self.ep._decoding -= 1
            last = self._chunk(None, "content", finish_reason(self.plan))
            last["usage"] = self._usage()
            found = self._timings()
            if found is not None:
                last["timings"] = found
            yield _sse(last)
            yield "data: [DONE]\n\n"
            status = 200
        finally:
            self._record(status)


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"
