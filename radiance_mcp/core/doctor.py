"""What `radiance-mcp doctor` found, one row per check: pure, findings in and rows out.

The doctor (app/doctor.py) checks a fleet file as an operator would otherwise find it, one failing call at a
time: the log roots and the files the config names, each host's login and host key, each service's ledger
(readable, which engine, the newest boot's state) and endpoint (its answer and the dialect it speaks). It
reads; this module says what each read found, as a ``DoctorRow``: ok, fail, or skip (not checked, and why:
another check it needs failed, or the config names nothing to check).

A failure is told by the error it met, whose message names the input, the rule and the remedy; where the
error carries its remedy as data (an SSH host key's out-of-band steps, a file not there), the remedy has
its own field and the finding is the rest of the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.errors import RadianceMCPError
from radiance_mcp.core.rules.probe_shape import api_said
from radiance_mcp.core.rules.settled import finding as unsettled_finding
from radiance_mcp.core.wording.refusals import ApiChoice, quote

Status = Literal["ok", "fail", "skip"]
RootKind = Literal["directory", "missing", "other"]
"""What a log root's path is: a directory, nothing, or something else (a file, a device)."""

MODELS_ROUTE = "/v1/models"
"""The light GET an endpoint is asked first: no prompt, no prefill; every OpenAI-compatible engine serves it."""
HEALTH_ROUTE = "/health"
"""Asked when MODELS_ROUTE is not answered with 200 (an engine that serves no model list)."""


@dataclass(frozen=True)
class DoctorRow:
    """One check of the fleet file and what it found."""

    what: str
    """'log root', 'host', 'env_file', 'serve_script', 'ledger' or 'endpoint'."""
    subject: str
    """Whose: a log root's key (server.log_roots[0]), a host's or a service's name in the config."""
    status: Status
    finding: str
    remedy: str | None = None


@dataclass(frozen=True)
class Reply:
    """One answer of an endpoint to a GET."""

    route: str
    status: int
    data: Any
    """The body as JSON; None when it is not JSON."""
    text: str
    latency_s: float


def holds(checks: Sequence[DoctorRow]) -> bool:
    """Every check holds: none failed (a skipped check names the failed one it needs, or nothing to check)."""
    return all(check.status != "fail" for check in checks)


def counts(checks: Sequence[DoctorRow]) -> dict[Status, int]:
    return {status: sum(1 for c in checks if c.status == status) for status in ("ok", "fail", "skip")}


def failed(what: str, subject: str, error: RadianceMCPError) -> DoctorRow:
    """A check that met an error: its message, less the remedy it carries as data, which has its own field
    (an error without one names its remedy in its message)."""
    message, remedy = str(error), error.remedy
    if remedy and message.endswith(remedy):
        return DoctorRow(what, subject, "fail", message[: -len(remedy)].rstrip(" ;,."), remedy)
    return DoctorRow(what, subject, "fail", message, remedy or None)


def skipped(what: str, subject: str, why: str) -> DoctorRow:
    return DoctorRow(what, subject, "skip", why)


def root_check(key: str, path: str, kind: RootKind) -> DoctorRow:
    """A local log root: a directory, or what to do."""
    if kind == "directory":
        return DoctorRow("log root", key, "ok", f"{path}: a directory")
    found = "no such directory" if kind == "missing" else "not a directory"
    return DoctorRow("log root", key, "fail", f"{path}: {found}",
                 f"create the directory that holds the ledgers, or correct the path in {key}")


def file_check(key: str, service: str, where: str, lines: int) -> DoctorRow:
    """A service's env_file or serve_script (key), read where it is."""
    return DoctorRow(key, service, "ok", f"{where}: readable, {lines:,} line{'' if lines == 1 else 's'}")


def host_check(name: str, where: str) -> DoctorRow:
    return DoctorRow("host", name, "ok", f"{where}: reachable over SSH, host key verified, logged in")


def ledger_check(service: str, boot: Boot) -> DoctorRow:
    """A service's newest boot: which engine printed it and whether it settled (its lines), else the finding
    and next step the settled rule gives (core.rules.settled)."""
    state = boot.state
    if state.status != "settled":
        return DoctorRow("ledger", service, "fail", unsettled_finding(boot))
    counted = f" (boot {boot.index} of {boot.boots_seen})" if boot.index > 0 and boot.boots_seen else ""
    if state.lines:
        said = f"line{'s' if len(state.lines) > 1 else ''} {', '.join(str(line.number) for line in state.lines)}"
    else:
        said = f"no refusal in its log; {boot.engine} prints no settled line"
    return DoctorRow("ledger", service, "ok", f"{boot.engine}, newest boot{counted} settled ({said})")


def endpoint_check(service: str, endpoint: str, replies: Sequence[Reply], expected: ApiChoice | None,
                   expected_from: str) -> DoctorRow:
    """An endpoint's answers to MODELS_ROUTE (and HEALTH_ROUTE after a non-200) and the dialect it speaks.

    expected is the dialect the config's engine, else the ledger's, names (expected_from says which); the
    endpoint's model list may name one too (core.rules.probe_shape.api_said): two that differ fail, since
    the probes would speak the wrong one, or the endpoint is another service's.
    """
    answered = next((reply for reply in replies if reply.status == 200), None)
    if answered is None:
        tried = "; ".join(f"GET {r.route}: HTTP {r.status}, {quote(r.text)}" for r in replies)
        return DoctorRow("endpoint", service, "fail", f"{endpoint}: no 200 answer ({tried})",
                     "check that endpoint is the engine's OpenAI-compatible server, http://host:port")
    said = api_said(answered.data) if answered.route == MODELS_ROUTE else None
    head = f"{endpoint}: GET {answered.route} answered 200 in {answered.latency_s:.2f} s"
    if said is not None and expected is not None and said[0] != expected:
        return DoctorRow("endpoint", service, "fail",
                     f"{head}, its models owned_by {said[1]!r}: the {said[0]} dialect, but {expected_from} names "
                     f"{expected}",
                     "check that endpoint is this service's, or set the service's engine to the one it runs")
    if said is not None:
        dialect = f"dialect {said[0]} (owned_by {said[1]!r})"
    elif expected is not None:
        dialect = f"dialect {expected} ({expected_from})"
    else:
        dialect = "dialect told from its first refusal (the probes' 'auto')"
    return DoctorRow("endpoint", service, "ok", f"{head}; {dialect}")
