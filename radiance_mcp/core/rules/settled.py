"""A boot that did not settle has no ceiling, no pool and no plan: the one rule, and what it tells the reader.

Every engine's boot carries its state (core.boot.Boot.state: radiance's rule in core.ledger, the other engines'
in core.engines.common.boot_state); ``require_settled`` refuses a boot that is not settled with BootNotSettled,
its lines and the next step, in the engine's own terms; ``finished`` says whether a boot has printed all it will.
"""

from __future__ import annotations

from radiance_mcp.core.boot import Boot, BootState, quoted
from radiance_mcp.core.constants import MAX_WAIT_S
from radiance_mcp.core.errors import BootNotSettled
from radiance_mcp.core.ledger import PHRASES


def require_settled(boot: Boot) -> None:
    """BootNotSettled for a boot that refused or never settled, naming its lines and the next step."""
    state = boot.state
    if state.status != "settled":
        raise BootNotSettled(finding(boot), state.status, tuple(line.number for line in state.lines))


def finding(boot: Boot) -> str:
    """What a boot that did not settle tells the reader: its lines, and what to do next."""
    if boot.engine == "radiance":
        return boot_finding(boot, boot.state)
    return refusal_finding(boot) if boot.state.status == "refused" else unfinished_finding(boot)


WAIT_REMEDY = (f"to wait for it, call again with wait_s (up to {MAX_WAIT_S} s) and, to wait past the boot you read "
               "before, after_line and after_byte: its ledger's first_line and first_byte")


def unfinished_finding(view: Boot) -> str:
    """An open engine's boot that is its log's newest and stops before its KV cache (core.engines.common.boot_state)."""
    return (f"{view.where()}: this boot has not finished starting: it printed no line that ends a start-up (the "
            "server's ready line) and has not sized its KV cache yet, so the figures it has not printed may yet come "
            f"(still starting, or the log was cut). Next: read it again once the server is up ({WAIT_REMEDY}); if "
            "the log was cut, pass the boot's lines through its KV cache")


def finished(boot: Boot) -> bool:
    """Whether the boot has printed all it will: it refused, printed its settled or ready lines, or a later boot
    follows it. A wait for a boot to settle ends here (sources.settling)."""
    later = boot.index < -1 or (boot.boots_seen is not None and 0 < boot.index < boot.boots_seen)
    return boot.state.status == "refused" or bool(boot.state.lines) or later


def boot_finding(boot: Boot, state: BootState) -> str:
    """What a boot that did not settle tells the reader: its lines, and the tool to call next."""
    src = boot.where()
    this = boot.index - boot.boots_seen - 1 if boot.boots_seen else None
    earlier = f"boot={this - 1}" if this is not None and boot.index > 1 else None
    lines = "; ".join(f"line {line.number}: {quoted(line)}" for line in state.lines)
    if state.status == "refused":
        where = (f"on this ledger, proven_boot={this - 1} and candidate_boot={this}" if earlier and this
                 else "this boot as the candidate, the last boot that served (its own ledger) as the proven one")
        read_from = f" ({earlier}, if it served)" if earlier else ""
        return (
            f"{src}: this boot refused to start ({lines}). A refused boot never settles, so it has no "
            f"ceiling and its pool backs nothing. Next: audit_step_shape ({where}) to price the shape "
            f"change that refused; read the ceiling from a boot that settled{read_from}."
        )
    words = PHRASES["settled"].keyword
    detail = [f"line {line.number} holds {words!r} but not as 'card N settled at X free against F' with "
              f"sizes (a negative or malformed figure?): {quoted(line)}"
              for key, line in boot.near_misses if key == "settled"]
    serving = boot.first("serving")
    before = f" (or an earlier boot, {earlier})" if earlier else ""
    if serving is not None:
        detail.append(f"it serves (line {serving.line.number}), so the log read was filtered or cut")
        next_step = f"pass the service's complete boot log{before}"
    else:
        next_step = (f"it has not settled yet (still starting, or the log was cut): read it again once the service "
                     f"serves{before} ({WAIT_REMEDY})")
    found = f" ({'; '.join(detail)})" if detail else ""
    return (
        f"{src}: this boot printed no 'card N settled at X free against F' line and no refusal{found}, so it has "
        f"no ceiling. Next: {next_step}; to compare its shape with a boot that served, call audit_step_shape."
    )


def refusal_finding(view: Boot) -> str:
    """A refused boot named by its lines, with what changes it."""
    refusals = "; ".join(f"line {r.line.number}: {quoted(r.line)} ({r.detail})" for r in view.refusals if r.final)
    return (f"{view.where()}: this boot refused to start ({refusals}). A refused boot never settles, so it has no "
            "ceiling and its KV cache backs nothing; read the ceiling from a boot that served")
