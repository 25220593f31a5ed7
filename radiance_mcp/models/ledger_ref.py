"""The ledger reference: which boot ledger a tool reads, and the one rule for naming it.

A ledger is named by exactly one of ``service`` / ``log`` / ``log_text`` / ``container``;
``container`` needs ``host``, and ``host`` goes with ``log`` or ``container``. The rule lives
in ``source_problem`` (the fleet file's services keep it too, through config.py), the fields'
types and descriptions in ``FIELDS``; every tool that reads a ledger builds its fields from
them (``ledger_field``), audit_step_shape's ``proven_`` / ``candidate_`` ones included.
Resolving a reference to a source is sources.ledger_source's job.
"""

from collections.abc import Sequence
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from radiance_mcp.models.base import BootIndex, ByteOffset, Input, LedgerText, LineNumber, Name, PathArg, WaitSeconds

SOURCE_KINDS = ("service", "log", "log_text", "container")
"""The ways to name a ledger; exactly one names it."""

CONTAINER_NEEDS_HOST = "container needs host: the host (from the fleet config) where podman runs it"
HOST_NEEDS_SOURCE = "host goes with log (a file on that host) or container (its podman logs)"

Role = Literal["ledger", "contract", "plan", "proven", "candidate", "shared"]
"""Which tool reads the ledger, for the wording of its fields: one ledger (read_budget_table,
compute_ceiling, render_gates, verify_deploy), the ledger behind a pool contract, a plan's
ledger (none: the whole fleet), or audit_step_shape's sides and shared source."""

# The shared wording of these arguments is said once, in the server's instructions (app/server.py
# LEDGER_ARGUMENTS), not in every tool's schema: "" where a role words an argument as it does.
FIELDS: dict[str, dict[Role, str]] = {
    "service": {
        "plan": "A service list_fleet names. Omit every source: the whole fleet.",
        "ledger": "",
        "contract": "A fleet service: its model and ledger fill gaps.",
        "proven": "",
        "candidate": "",
        "shared": "",
    },
    "log": {
        "plan": "",
        "ledger": "",
        "contract": "Ledger file for omitted values (on host, if given).",
        "proven": "",
        "candidate": "",
        "shared": "",
    },
    "log_text": {
        "plan": "",
        "ledger": "",
        "contract": "Ledger text for omitted values.",
        "proven": "",
        "candidate": "",
        "shared": "",
    },
    "container": {
        "plan": "",
        "ledger": "",
        "contract": "",
        "proven": "",
        "candidate": "",
        "shared": "",
    },
    "host": {
        "plan": "Fleet host of log or container (SSH); alone: that host's services.",
        "ledger": "",
        "contract": "",
        "shared": "",
    },
    "boot": {
        "plan": "",
        "ledger": "",
        "contract": "",
        "proven": "Default -1 (newest); -2 (the one before) when both sides share one source.",
        "candidate": "",
    },
}


def ledger_field(role: Role, name: str) -> Any:
    """The pydantic field of one ledger argument, as the tool of role words it (None by default).

    The boot of one ledger defaults to -1; a side of the audit defaults to None (its default
    depends on whether the source is shared).
    """
    default = -1 if name == "boot" and role in ("ledger", "contract", "plan") else None
    return Field(default, description=FIELDS[name][role] or None)


def source_problem(
    given: Sequence[str], host: bool, *, required: bool = True, count: str | None = None, host_alone: bool = False
) -> str | None:
    """What is wrong with the ledger sources given (SOURCE_KINDS names, maybe prefixed), or None.

    required: exactly one source (else at most one); count: the message for a wrong number,
    default the one for a single ledger. host: whether host was given (see pairing_problem).
    """
    kinds = {name.removeprefix("proven_").removeprefix("candidate_") for name in given}
    if len(given) > 1 or (required and not given):
        found = ", ".join(given) if given else "none"
        return count or (f"give exactly one ledger source of service, log, log_text or container (found: {found}); "
                         "a service from the fleet config is the usual choice")
    return pairing_problem(kinds, host, host_alone=host_alone)


def pairing_problem(kinds: set[str], host: bool, *, host_alone: bool = False) -> str | None:
    """The host rule for the source kinds given: container needs host; host goes with log or container
    (host_alone: a host may also stand alone, as a fleet file's service on a host with only an endpoint)."""
    if "container" in kinds and not host:
        return CONTAINER_NEEDS_HOST
    if host and not host_alone and not {"log", "container"} & kinds:
        return HOST_NEEDS_SOURCE
    return None


class LedgerRef(Input):
    """Which ledger to read: exactly one of service, log, log_text, container (log and container with host)."""

    service: Name | None = ledger_field("ledger", "service")
    log: PathArg | None = ledger_field("ledger", "log")
    log_text: LedgerText | None = ledger_field("ledger", "log_text")
    host: Name | None = ledger_field("ledger", "host")
    container: Name | None = ledger_field("ledger", "container")
    boot: BootIndex = ledger_field("ledger", "boot")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        problem = source_problem(given_sources(self), self.host is not None)
        if problem:
            raise ValueError(problem)
        return self


def given_sources(model: Input, prefix: str = "") -> list[str]:
    """The names of the ledger sources given on model (prefix: 'proven_' or 'candidate_')."""
    return [f"{prefix}{k}" for k in SOURCE_KINDS if getattr(model, f"{prefix}{k}", None) is not None]


class Settling(Input):
    """The wait for a new boot to settle (sources.settling): past the boot after_line / after_byte name (its
    first_line and first_byte as an answer's ledger gave them), for at most wait_s seconds."""

    # Said once, in the server's instructions (app/server.py LEDGER_ARGUMENTS), as the ledger sources are.
    wait_s: WaitSeconds = 0
    after_line: LineNumber | None = None
    after_byte: ByteOffset | None = None
