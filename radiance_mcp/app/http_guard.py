"""What `serve --http` holds for a client before its request is read: a bound on the request
head's time and caps on connections, in all and per client address.

Security: uvicorn reads a request head for as long as the client takes and holds every
connection it accepts, so sockets that send a head byte now and then, and never finish it,
hold the server's open files for ever, before the bearer token (an ASGI matter, read with the
head) is ever checked: with its open-file limit at 256, 300 such sockets made the server
exit. Here each connection is counted when it is accepted: past --max-connections in all, or
--max-connections-per-client from one address, it gets a 503 that names the cap and is
closed; an admitted connection whose request head is not complete within --head-timeout
(from its accept, or from the end of its last response) gets a 408 and is closed. Behind a
reverse proxy every client has the proxy's address: raise the per-client cap there. The
process's open-file limit is raised to what the cap needs (open_files_for), or the cap refused.

The protocol is uvicorn's h11 one (pure Python; uvicorn's "auto" would take httptools when it
is installed), with these checks around it; the token check stays in the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import resource
import signal
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from radiance_mcp.core.errors import InputError

REFUSAL_LINGER_S = 2.0
"""How long a refused connection is read (and its bytes dropped) after the answer, so that the
request its client sent meanwhile does not make the kernel reset the connection, losing the answer."""
SHUTDOWN_GRACE_S = 5
"""On SIGTERM or Ctrl-C, how long requests in flight may take to finish before they are cancelled
(uvicorn waits for ever by default: one whose body never came held the exit open); below the 10 s
a container runtime waits before its SIGKILL."""
OPEN_FILES_BESIDE_CONNECTIONS = 64
"""Open files the server needs beyond its clients' connections: standard streams, the listening
socket, the event loop's, log files being read, SSH and probe connections."""


@dataclass(frozen=True)
class HttpLimits:
    """The bounds `serve --http` keeps (the defaults: http_settings.HEAD_TIMEOUT_S and the caps beside it)."""

    head_timeout_s: float
    max_connections: int
    max_connections_per_client: int


class _Admission:
    """The admitted connections of one server, in all and by client address."""

    def __init__(self, limits: HttpLimits) -> None:
        self.limits = limits
        self.total = 0
        self.by_client: Counter[str | None] = Counter()
        self.lingering = 0
        """Refused connections still read after their answer: at most max_connections (then closed at once)."""

    def refusal(self, client: str | None) -> str | None:
        """Why a new connection from client is not admitted, or None."""
        limits = self.limits
        if self.by_client[client] >= limits.max_connections_per_client:
            return (f"{client} already holds {self.by_client[client]} connections, the most one address may hold "
                    f"(--max-connections-per-client {limits.max_connections_per_client}): close one and retry; "
                    "behind a reverse proxy, where every client has the proxy's address, raise that cap")
        if self.total >= limits.max_connections:
            return (f"the server holds {self.total} connections, its most (--max-connections "
                    f"{limits.max_connections}): retry shortly")
        return None


class _GuardedH11(H11Protocol):
    """uvicorn's h11 protocol, admitting a connection under the caps and bounding each request head."""

    admission: ClassVar[_Admission]
    _admitted = False
    _refused = False
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        client = self.client[0] if self.client else None
        refusal = self.admission.refusal(client)
        if refusal is not None:
            self._refuse(http.HTTPStatus.SERVICE_UNAVAILABLE, refusal)
            return
        self._admitted = True
        self.admission.total += 1
        self.admission.by_client[client] += 1
        self._wait_for_head()

    def data_received(self, data: bytes) -> None:
        if not self._refused:  # a refused connection's bytes are dropped
            super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        if self._refused:
            self.admission.lingering -= 1
        self._release()
        super().connection_lost(exc)

    def _release(self) -> None:
        """The connection no longer counts against the caps (once, however often called)."""
        if self._admitted:
            self._admitted = False
            client = self.client[0] if self.client else None
            self.admission.total -= 1
            self.admission.by_client[client] -= 1
            if not self.admission.by_client[client]:
                del self.admission.by_client[client]

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._wait_for_head()  # the next request's head, on a kept-alive connection

    def _wait_for_head(self) -> None:
        """Close the connection unless a request head completes within the bound.

        uvicorn makes a new request cycle when a head is complete, so the head came in time
        exactly when the cycle is no longer the one there was when the clock started.
        """
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.admission.limits.head_timeout_s, self._head_due, self.cycle)

    def _head_due(self, cycle: object) -> None:
        self._head_timer = None
        if self.cycle is cycle and not self.transport.is_closing():
            bound = self.admission.limits.head_timeout_s
            self._refuse(http.HTTPStatus.REQUEST_TIMEOUT, f"the request head did not arrive within {bound:g} s "
                         "(--head-timeout): send the whole head at once")

    def _refuse(self, status: http.HTTPStatus, reason: str) -> None:
        """Answer status with reason as plain text (bytes: no request was read), and close.

        The close lingers: the answer is followed by a FIN, and what the client sends is
        read and dropped until it closes too, or for REFUSAL_LINGER_S at most, so its
        request does not reach a closed socket, whose reset would destroy the answer.
        """
        body = f"{reason}\n".encode()
        head = (f"HTTP/1.1 {status.value} {status.phrase}\r\ncontent-type: text/plain; charset=utf-8\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
        self.transport.write(head + body)
        self._release()
        self._refused = True
        self.admission.lingering += 1
        if self.admission.lingering > self.admission.limits.max_connections or not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self.loop.call_later(REFUSAL_LINGER_S, self.transport.close)


def open_files_for(limits: HttpLimits) -> None:
    """Raise this process's open-file limit to what the connection cap needs, or refuse the cap.

    A cap above the limit is no cap: past the limit accept() fails, and the server stops
    serving (uvicorn's process exited so, at 256 open files and 300 held sockets). The cap
    needs three times its count: the admitted connections, the refused ones lingering, and
    those accepted and not yet counted (up to the listen backlog, set to the cap); and the rest.
    """
    needed = 3 * limits.max_connections + OPEN_FILES_BESIDE_CONNECTIONS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))  # ValueError above the hard limit
    except (ValueError, OSError):
        usable = soft if hard == resource.RLIM_INFINITY else hard
        raise InputError(
            f"--max-connections {limits.max_connections} needs {needed} open files (3 per connection: admitted, "
            f"refused while its answer is read, accepted and not yet counted; and {OPEN_FILES_BESIDE_CONNECTIONS} "
            f"more), and this process may open {soft} (ulimit -n) and cannot raise that to {needed}: pass "
            f"--max-connections {max(1, (usable - OPEN_FILES_BESIDE_CONNECTIONS) // 3)} or less, or raise the "
            f"limit (ulimit -n {needed})"
        ) from None


class _Server(uvicorn.Server):
    """uvicorn's server, which also stops for a SIGTERM noted before its own signal handlers were in place."""

    def __init__(self, config: uvicorn.Config, terminated: threading.Event | None) -> None:
        super().__init__(config)
        self.terminated = terminated

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            if self.terminated is not None and self.terminated.is_set():
                self.handle_exit(signal.SIGTERM, None)
            yield


def serve(app: ASGIApp, sock: socket.socket, limits: HttpLimits, terminated: threading.Event | None = None) -> None:
    """Serve app on the listening socket under limits until SIGINT or SIGTERM (open_files_for(limits) first, and
    the heap settled: server.settle_heap).

    Requests in flight then get SHUTDOWN_GRACE_S to finish. terminated, when given, is set by a
    SIGTERM handler that raises nothing (serve --demo: cli._note_sigterm); set before the
    server ran, the server stops as soon as it has started.
    """

    class Guarded(_GuardedH11):
        admission = _Admission(limits)

    config = uvicorn.Config(app, http=Guarded, backlog=limits.max_connections, log_level="warning",
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
    from radiance_mcp.app.server import settle_heap

    settle_heap()
    _Server(config, terminated).run(sockets=[sock])
