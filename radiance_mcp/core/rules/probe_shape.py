"""What a service's boot ledger says a probe may ask of it: the backed sequences and the window.

Pure: a parsed ``Boot`` (or another engine's ``Boot``) in, a ``ProbeShape`` out, and the
checks the probes make against it before anything is sent. The figures come from the ledger's
own lines, each kept with its line: ``backs N sequences all at M tokens at once`` (the capacity referee) and the echoed
``--max-num-seqs`` and ``--max-model-len``. A line the boot lacks is said, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from radiance_mcp.core.boot import Boot, Figure, Hit, Line
from radiance_mcp.core.constants import KV_DTYPES, ModelConstants
from radiance_mcp.core.errors import GuardRailError
from radiance_mcp.core.rules.capacity import PoolContract, pool_contract
from radiance_mcp.core.rules.contract import binding_rank, seats_printed_as, served_seats
from radiance_mcp.core.units import fmt_mib
from radiance_mcp.core.wording.refusals import ApiChoice


@dataclass(frozen=True)
class ProbeShape:
    source: str
    backed_seqs: Figure | None
    """N of 'backs N sequences all at M tokens at once'."""
    backed_tokens: Figure | None
    """M of the same line."""
    seats: Figure | None
    """The echoed --max-num-seqs."""
    window: Figure | None
    """The echoed --max-model-len, else M of the backs line."""
    refused: tuple[Line, ...]
    """The refusal's lines (Boot.state) when the boot refused to start; empty otherwise."""
    pool: Figure | None
    """The echoed --vram-kv-mib."""
    contract: PoolContract | None
    """The pool contract of the echoed --vram-kv-mib at these seats and window (None: a flag is missing)."""
    missing: tuple[str, ...]
    """Lines the boot lacks, said in the plan."""

    def cite(self, figure: Figure) -> str:
        return figure.cite(self.source)


def _count(hit: Hit, name: str, source: str, unit: str) -> Figure:
    """A whole number read off the hit's line (a count: exact, so no resolution)."""
    return Figure(Decimal(int(hit.number(name, source))), unit, (hit.line,))


SAME_NAME: dict[str, ApiChoice] = {"radiance": "radiance", "vllm": "vllm", "sglang": "sglang"}
"""The engines whose API speaks the refusal dialect of the same name."""


def api_of(engine: str | None, boot: Boot | None) -> ApiChoice | None:
    """The configured engine's refusal dialect. llama.cpp's is told by its boot: llama-cpp-python's server
    starts as a uvicorn app ('Uvicorn running on'), llama-server listens ('server is listening on') and may
    serve slots or more than one sequence (llama-cpp-python serves one); where the boot shows none of these,
    the first refusal tells them apart, as it does for a service with no engine set."""
    if engine in SAME_NAME:
        return SAME_NAME[engine]
    if engine == "llama.cpp" and boot is not None:
        if boot.first("python_server") is not None:
            return "llama-cpp-python"
        seqs = boot.settings.get("n_seq_max")
        listens = boot.first("llama_server") is not None
        return "llama.cpp" if listens or "slots" in boot.settings or (seqs is not None and seqs.value > 1) else None
    return None


MODEL_OWNERS: dict[str, ApiChoice] = {"radiance": "radiance", "vllm": "vllm", "sglang": "sglang",
                                      "llamacpp": "llama.cpp"}
"""The owned_by an engine's GET /v1/models gives its models, where it names the engine (vLLM's and SGLang's
model cards, llama-server's 'llamacpp', the simulator's radiance), and the refusal dialect it speaks.
llama-cpp-python's 'me' names no engine, nor does OpenAI's own 'system'."""


def api_said(models: object) -> tuple[ApiChoice, str] | None:
    """The dialect a GET /v1/models answer names by its first model's owned_by, and that owned_by; None where
    it names none of MODEL_OWNERS (or the answer is not a model list)."""
    data = models.get("data") if isinstance(models, dict) else None
    first = data[0] if isinstance(data, list) and data else None
    owner = first.get("owned_by") if isinstance(first, dict) else None
    if isinstance(owner, str) and owner in MODEL_OWNERS:
        return MODEL_OWNERS[owner], owner
    return None


def probe_shape(boot: Boot, model: ModelConstants) -> ProbeShape:
    """What a boot of any engine lets a probe ask: the sequences its KV cache backs at the window, the seats,
    the window and its refusal's lines, each with its line. radiance states them in its backs line and echoed
    flags (with the pool contract of its echoed pool); the other engines in their binding rank's figures."""
    return ledger_shape(boot, model) if boot.engine == "radiance" else engine_shape(boot)


def ledger_shape(boot: Boot, model: ModelConstants) -> ProbeShape:
    """The boot's backed sequences, seats, window and pool contract, each with its line."""
    src = boot.source
    backs = boot.first("backs")
    backed_seqs = _count(backs, "seqs", src, "sequences") if backs else None
    backed_tokens = _count(backs, "tokens", src, "tokens") if backs else None
    flags = boot.flags
    seats_hit, window_hit = flags.get("max-num-seqs"), flags.get("max-model-len")
    seats = _count(seats_hit, "value", src, "sequences") if seats_hit else None
    window = _count(window_hit, "value", src, "tokens") if window_hit else backed_tokens
    missing = []
    if backs is None:
        missing.append("'backs N sequences all at M tokens at once'")
    if seats_hit is None:
        missing.append("the echoed --max-num-seqs")
    if window_hit is None:
        missing.append("the echoed --max-model-len")
    pool, dtype = flags.get("vram-kv-mib"), flags.get("kv-cache-dtype")
    contract, pool_figure = None, _count(pool, "value", src, "MiB") if pool else None
    if pool is None or dtype is None or dtype.fields["value"] not in KV_DTYPES:
        missing.append("the echoed --vram-kv-mib and --kv-cache-dtype (bf16 or fp8), for the pool contract,")
    elif seats is not None and window is not None:
        assert pool_figure is not None
        contract = pool_contract(pool_figure.value, seats.count, window.count,
                                 dtype.fields["value"], model)
    state = boot.state
    refused = state.lines if state.status == "refused" else ()
    return ProbeShape(src, backed_seqs, backed_tokens, seats, window, refused, pool_figure, contract,
                       tuple(missing))


def engine_shape(view: Boot) -> ProbeShape:
    """The shape another engine's boot states: the full-length sequences its KV cache backs at its window
    (KV tokens / window, rounded down), its slots or running requests, and its refusal's lines.

    The rank whose cache holds the fewest tokens binds. What the log does not print is listed in missing.
    """
    refused = tuple(r.line for r in view.refusals if r.final)
    if refused:  # predict_boundary refuses to plan on it, naming these lines
        return ProbeShape(view.source, None, None, None, None, refused, None, None, ())
    rank = binding_rank(view)
    seqs, window = rank.full_length_sequences, rank.window_tokens
    backed, window_figure = seqs, window  # read as whole numbers (.count): a fraction of a sequence is cut
    seats = served_seats(view)
    missing = [f"{gap.printed_in} ({gap.figure})" for gap in rank.missing
               if gap.figure in ("kv_tokens", "window_tokens", "full_length_sequences")]
    if seats is None:
        printed = seats_printed_as(view.engine)
        missing.append(f"the sequences {view.engine} serves at once "
                       + (f"({printed})" if printed else "(--max-num-seqs, not printed at INFO)"))
    return ProbeShape(view.source, backed, window_figure, seats, window_figure, (), None, None, tuple(missing))


NO_LEDGER = "the service has no ledger (log or container) in the fleet config"
"""Why a probe has no shape to check against."""


def checked_window(
    shape: ProbeShape | None, given: int | None, argument: str = "max_model_len"
) -> tuple[int | None, str | None]:
    """The window a probe uses and where it came from: the ledger's, which a given one must equal (every probe
    asks this before it sends anything); without a ledger's window, the given one ("input", unchecked) or None."""
    if shape is None or shape.window is None:
        return given, "input" if given is not None else None
    window = shape.window.count
    if given is not None and given != window:
        raise GuardRailError(
            f"{argument}={given:,} disagrees with the ledger's window of {window:,} tokens "
            f"({shape.cite(shape.window)}), the window the service runs; nothing was sent. Leave {argument} out "
            f"(the ledger's is read) or pass {argument}={window}",
            rule="window_from_ledger",
        )
    return window, f"ledger {shape.cite(shape.window)}"


@dataclass(frozen=True)
class ProbeExpectation:
    verdict: str
    """What the ledger predicts the probe will show."""
    lines: tuple[str, ...]
    """The ledger lines the prediction stands on."""
    not_checked: tuple[str, ...]
    """Checks that could not be made, and why."""


def predict_boundary(shape: ProbeShape | None, n: int, *, over_shape: bool, no_ledger_reason: str) -> ProbeExpectation:
    """What N concurrent full-window prompts will show; n above the backed sequences is refused
    unless over_shape: then only the queue or the KV cache is probed, not the shape."""
    if shape is None:
        return ProbeExpectation(
            f"no prediction: {no_ledger_reason}",
            (),
            (f"n={n} against the sequences the shape backs at once: {no_ledger_reason}",
             f"max_model_len against the ledger's --max-model-len: {no_ledger_reason}"),
        )
    if shape.refused:
        cited = "; ".join(f"{shape.source}:{line.number}: {line.text.strip()!r}" for line in shape.refused)
        raise GuardRailError(
            f"boundary_probe: the service's newest boot refused to start ({cited}), so nothing serves the shape "
            "this probe would test and nothing was planned or sent. Next: call audit_step_shape to compare that "
            "boot with the boot that served, and probe once a boot has settled"
        )
    figures = (shape.backed_seqs, shape.seats, shape.window, shape.pool)
    lines = tuple(shape.cite(f) for f in dict.fromkeys(f for f in figures if f is not None))
    not_checked = tuple(f"{what} is not in {shape.source}: its check was not made" for what in shape.missing)
    backed = shape.backed_seqs or shape.seats
    if backed is None:
        return ProbeExpectation(f"no prediction: {shape.source} names neither the backed sequences nor --max-num-seqs",
                          lines, not_checked)
    at = f" at {shape.window.count:,} tokens" if shape.window else ""
    seats = shape.seats.count if shape.seats else None
    contract = shape.contract
    if contract is not None and not contract.ok:
        expect = (
            f"0/{n} retrieved: the pool of {fmt_mib(contract.pool_mib)} MiB (--vram-kv-mib) fails its contract for "
            f"{contract.seqs} seats{at} (it needs {fmt_mib(contract.required_mib, 2)} MiB), so the engine refuses "
            f"full-window requests ('{contract.refusal}'); that is a finding about the shape: see check_pool_contract"
        )
    else:
        expect = (
            f"{n}/{n} retrieved: the ledger backs {backed.count} sequence(s){at} at once ({shape.cite(backed)}), "
            f"and n={n} is within it; anything less is a finding about the shape"
        )
    if n <= backed.count:
        return ProbeExpectation(expect, lines, not_checked)
    parts = [f"n={n} is above the {backed.count} sequence(s) the ledger backs at once ({shape.cite(backed)})"]
    if seats is not None and n > seats:
        parts.append(
            f"the engine serves at most {seats} at once (--max-num-seqs): the other {n - seats} wait in its queue "
            "and run as seats free"
        )
    if contract is not None and not contract.ok:
        parts.append("the pool fails its contract, so expect refusals, not answers")
    parts.append(f"{n}/{n} retrieved would say only that each prompt fits alone, nothing about the shape")
    if not over_shape:
        raise GuardRailError(
            "boundary_probe: " + "; ".join(parts) + f". The probe checks the shape at its own width: pass "
            f"n={backed.count} (or less), or over_shape=true to spend {n} full-window prefills past the shape "
            "knowingly",
            rule="probe_within_shape",
        )
    return ProbeExpectation("over the shape: " + "; ".join(parts), lines, not_checked)
