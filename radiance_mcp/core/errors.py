"""One error tree for radiance-mcp.

Every error a user can meet is one of these; third-party exceptions (asyncssh, httpx,
tomllib, pydantic) are translated where they are caught, with ``raise ... from exc``.
Each message names the input, the rule that was broken and the remedy.

    RadianceMCPError
    ├── ConfigError          the fleet file: which file, which key, what is wrong
    ├── InputError           a tool argument that breaks a rule (names the argument)
    │   └── GuardRailError   a request the procedures forbid (untraced reserve, 8-token decode)
    ├── SourceError          a ledger could not be read (path outside the roots, missing file)
    │   └── RemoteError      SSH: unknown or changed host key, timeout, dropped connection
    ├── LedgerError          the ledger was read but does not say what is needed
    │   ├── PhraseNotFound   a phrase of the table is absent from the boot (names the phrase)
    │   └── BootNotSettled   the boot refused to start or never settled: a finding, with its lines
    ├── ProbeError           an HTTP probe failed (endpoint, status, the body's start)
    └── EvalError            an eval's scenario or session record cannot be read (file, line, remedy)

The MCP layer turns any of them into the SDK's ``ToolError`` with the same message, and the
CLI prints the message and exits non-zero; neither ever shows a traceback for these.
"""

from __future__ import annotations

REFUSAL_META = "radiance-mcp/refusal"
"""The key of an MCP error result's _meta that holds a refusal's data (RadianceMCPError.refusal_data), e.g.
{"rule": "pool_contract", "arithmetic": "...", "remedy": "..."}: app/server.py writes it, the record reads it."""


class RadianceMCPError(Exception):
    """Base of every error radiance-mcp raises on purpose.

    ``rule``: the procedures' rule a refusal keeps, by its name in the rule book
    (radiance_mcp.core.rules.book, e.g. ``reserve_traced``); ``arithmetic`` and ``remedy``, where the
    rule's check gave them. They are data beside the message, never part of it: the MCP layer sends
    them as the error result's structured data (``refusal_data``), so a record of the session
    (``serve --record``) says which rule each refusal kept, and an eval scores it.
    """

    def __init__(self, message: str = "", *, rule: str | None = None, arithmetic: str = "",
                 remedy: str = "") -> None:
        self.rule = rule
        self.arithmetic = arithmetic
        self.remedy = remedy
        super().__init__(message)

    def refusal_data(self) -> dict[str, str] | None:
        """The refusal's rule with its arithmetic and remedy where given, or None for an error no rule names."""
        if self.rule is None:
            return None
        return {"rule": self.rule, **{k: v for k, v in (("arithmetic", self.arithmetic),
                                                          ("remedy", self.remedy)) if v}}


class ConfigError(RadianceMCPError):
    """The fleet config file is missing, unreadable or names something wrong."""


class InputError(RadianceMCPError):
    """A tool argument breaks a rule; the message names the argument and the remedy."""


class GuardRailError(InputError):
    """The request is one the procedures forbid; the message says what is allowed instead."""


class SourceError(RadianceMCPError):
    """A ledger source could not be read."""


class RemoteError(SourceError):
    """An SSH read failed: host key, connection, timeout or the remote command."""


class LedgerError(RadianceMCPError):
    """The ledger text does not hold what the tool needs, or holds a malformed figure."""

    def __init__(self, message: str = "", *, boots_held: int | None = None) -> None:
        self.boots_held = boots_held
        """Set where the boot asked for is not in the log: how many boots it holds."""
        super().__init__(message)


class FigureMissing(LedgerError):
    """The boot's log lacks a figure a rule needs (its message names each, where the engine prints it and how
    to get it): nothing is estimated. A tool may answer without that rule's verdict, saying why."""


class PhraseNotFound(LedgerError):
    """A phrase of the phrase table is missing from the boot being read."""

    def __init__(self, phrase_key: str, phrase: str, source: str, detail: str = "") -> None:
        self.phrase_key = phrase_key
        self.phrase = phrase
        self.source = source
        message = f"{source}: the phrase {phrase!r} ({phrase_key}) was not found"
        if detail:
            message += f" {detail}"
        message += (
            ". The tools read radiance's own words; pass the service's complete boot log (not a "
            "filtered or cut copy), or a boot that prints this line (boot=-2 for the one before)."
        )
        super().__init__(message)


class BootNotSettled(LedgerError):
    """The boot refused to start, or never printed its settled line: it has no ceiling to read.

    A finding about the service, not a reader failure; the message names the boot's lines and
    the tool to call next.
    """

    def __init__(self, message: str, status: str, lines: tuple[int, ...]) -> None:
        self.status = status
        self.lines = lines
        super().__init__(message)


class ProbeError(RadianceMCPError):
    """An HTTP probe could not get a usable answer from an endpoint."""


class EvalError(RadianceMCPError):
    """A scenario file or a session record (serve --record) cannot be read: the file, the line, the remedy."""
