"""Parsing and local reads off the event loop: bounded, fair, cancellable and time-limited.

Every CPU-bound parse of a caller's text (a ledger, a serve script, a dry run's argv) and
every local ledger read runs in a worker thread through ``run``, so the event loop keeps
answering other calls (tools/list, a small read) while a hostile input is in flight:

- bounded: at most CPU_SLOTS workers compute at once (more would only take turns at the
  interpreter lock, the event loop's turns among them);
- fair: at each checkpoint (a chunk of a file, a line of a ledger) a worker that has held
  its slot for SLICE_S hands it to the longest-waiting one, so a 1.5 KB read never waits
  behind eight reads of a 100 GiB sparse file for more than a few slices;
- cancellable: a cancelled call stops its worker at the next checkpoint;
- time-limited: work still running after READ_TIMEOUT_S stops with an error naming the
  input, the limit and the remedy (a 1 GiB ledger reads in about a second; a local read
  has no size cap, since it streams in constant memory).

The ledger reader calls its checkpoint per chunk and per line. A serve script's check and an
argv comparison have none: they hold their slot to the end, which their inputs' caps bound
(1 MiB of script: a few seconds at worst).

A CLI command that reads only given text and files on this machine runs with no event loop at
all (``drive``): ``run`` then does the job inline in the calling thread, under the same time
limit and with the same error, and ``gather`` and ``to_thread`` stand for asyncio's; asyncio is
not even imported. A coroutine on that path that awaits anything needing a loop (a socket, a
process, a sleep) is a RuntimeError at once, never a call that hangs or half runs.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, overload

from radiance_mcp.core.boot import StopCheck
from radiance_mcp.core.errors import SourceError

if TYPE_CHECKING:  # asyncio and the thread pool load with the first call on an event loop
    from concurrent.futures import ThreadPoolExecutor

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Job(Protocol[T_co]):
    """Work that calls checkpoint() often (per chunk of a file, per line): it raises to stop the job."""

    def __call__(self, *, checkpoint: StopCheck) -> T_co: ...


READ_TIMEOUT_S = 60.0
"""One local read or parse, wall time (as remote.Limits.command_timeout_s bounds a remote one)."""
CPU_SLOTS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
"""Workers computing at once: the CPUs this process may run on."""
MAX_WORKERS = 32
"""Threads; past this many calls in flight, a call waits for a thread before its turn."""
INLINE_CHARS = 64 * 1024
"""A text in memory this short may be parsed on the event loop rather than through ``run`` (a few ms at
worst, linear in its size): a thread's handoff costs more than its parse."""
SLICE_S = 0.01
"""A worker holds its slot this long before handing it to one that waits."""
_POLL_S = 0.05


class _Stopped(Exception):
    """The call was cancelled or ran out of time: its worker stops at the next checkpoint."""


class _TimedOut(_Stopped):
    """The job ran past READ_TIMEOUT_S."""


class _Slots:
    """CPU_SLOTS slots, handed over first come, first served (a freed slot goes to the
    longest waiter, never to the thread that freed it, unlike threading.Semaphore)."""

    def __init__(self, count: int) -> None:
        self._lock = threading.Lock()
        self._free = count
        self._waiting: deque[threading.Lock] = deque()

    def waiting(self) -> bool:
        return bool(self._waiting)

    def acquire(self, stopped: Callable[[], bool]) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiting.append(turn)
        while not turn.acquire(timeout=_POLL_S):
            if stopped():
                with self._lock:
                    if turn in self._waiting:
                        self._waiting.remove(turn)
                        raise _Stopped
                turn.acquire()  # handed the slot meanwhile: take it; the next checkpoint stops
                return

    def release(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._free += 1


_slots = _Slots(CPU_SLOTS)
_executor: ThreadPoolExecutor | None = None


class _Work:
    def __init__(self, timeout_s: float) -> None:
        self.stop = threading.Event()
        self.deadline = time.monotonic() + timeout_s
        self.holding = False
        self.turn_started = 0.0

    def take_slot(self) -> None:
        _slots.acquire(self.stop.is_set)
        self.holding, self.turn_started = True, time.monotonic()

    def give_slot(self) -> None:
        if self.holding:
            self.holding = False
            _slots.release()

    def checkpoint(self) -> None:
        if self.stop.is_set():
            raise _Stopped
        now = time.monotonic()
        if now > self.deadline:
            raise _TimedOut
        if now - self.turn_started >= SLICE_S and _slots.waiting():
            self.give_slot()
            self.take_slot()


_loopless: ContextVar[bool] = ContextVar("radiance_loopless", default=False)


def loopless() -> bool:
    """True inside ``drive``: no event loop runs, and work runs inline in this thread."""
    return _loopless.get()


def drive(call: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that needs no event loop to its end in this thread, and return its result.

    For a CLI command that reads only given text and files on this machine: ``run`` does its
    jobs inline meanwhile, and ``gather`` and ``to_thread`` await in turn. A coroutine that
    suspends (awaits a future: a socket, a process, a sleep) would need a loop: it is closed
    and a RuntimeError says so, as a bug of the caller's choice of path.
    """
    token = _loopless.set(True)
    try:
        try:
            waited = call.send(None)
        except StopIteration as done:
            result: T = done.value
            return result
        call.close()
    finally:
        _loopless.reset(token)
    raise RuntimeError(f"a call driven without an event loop awaited {waited!r}, which needs one")


async def run(job: Job[T], *, label: str, remedy: str) -> T:
    """job(checkpoint=...) in a worker thread, stopped at READ_TIMEOUT_S or when the call is cancelled
    (inline in this thread, under the same limit, when driven without a loop: ``drive``).

    label names the input (a file, 'log_text') and remedy what to do, in the error when the
    time limit stops the job.
    """
    timeout_s = READ_TIMEOUT_S
    try:
        if _loopless.get():
            return _inline(job, timeout_s)
        return await _in_worker(job, timeout_s)
    except _TimedOut:
        raise SourceError(
            f"{label}: stopped after the {timeout_s:g} s limit for reading and parsing one input here; {remedy}"
        ) from None


def _inline(job: Job[T], timeout_s: float) -> T:
    """The job in this thread, the only one computing: its checkpoint watches the time limit alone."""
    deadline = time.monotonic() + timeout_s

    def checkpoint() -> None:
        if time.monotonic() > deadline:
            raise _TimedOut

    return job(checkpoint=checkpoint)


async def _in_worker(job: Job[T], timeout_s: float) -> T:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(MAX_WORKERS, thread_name_prefix="radiance-work")
    work = _Work(timeout_s)

    def in_thread() -> T:
        work.take_slot()
        try:
            return job(checkpoint=work.checkpoint)
        finally:
            work.give_slot()

    try:
        return await asyncio.get_running_loop().run_in_executor(_executor, in_thread)
    except asyncio.CancelledError:
        work.stop.set()
        raise


@overload
async def gather(*calls: Coroutine[Any, Any, T], return_exceptions: Literal[False] = False) -> list[T]: ...
@overload
async def gather(*calls: Coroutine[Any, Any, T], return_exceptions: Literal[True]) -> list[T | BaseException]: ...
async def gather(*calls: Coroutine[Any, Any, T], return_exceptions: bool = False,
                 ) -> list[T] | list[T | BaseException]:
    """asyncio.gather on an event loop; without one (``drive``), the calls awaited in turn.

    return_exceptions: an exception a call raises takes its place in the list; else the first
    one is raised (and, without a loop, the calls after it never start).
    """
    if not _loopless.get():
        import asyncio

        return list(await asyncio.gather(*calls, return_exceptions=return_exceptions))
    results: list[T | BaseException] = []
    pending = list(calls)
    try:
        while pending:
            call = pending.pop(0)
            try:
                results.append(await call)
            except Exception as exc:
                if not return_exceptions:
                    raise
                results.append(exc)
    finally:
        for call in pending:
            call.close()  # never started: closed, so no 'never awaited' warning
    return results


async def to_thread(function: Callable[..., T], *args: Any) -> T:
    """asyncio.to_thread on an event loop; without one (``drive``), the call in this thread."""
    if _loopless.get():
        return function(*args)
    import asyncio

    return await asyncio.to_thread(function, *args)
