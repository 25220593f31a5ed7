"""The simulated radiance: an engine model, an OpenAI-compatible endpoint and a demo fleet.

Nobody on this project can run radiance, so tests, probes and the demo run against this
simulator, which follows the seeds' laws (PHRASEBOOK) and writes its boot ledger through the
same phrase table the reader parses (radiance_mcp.core.ledger.PHRASES). The interface::

    from radiance_mcp.sim import Shape, EngineModel, Behaviour, SimEndpoint, SimFleet, count_tokens

    shape = Shape()                  # frozen; the defaults are PHRASEBOOK section 8's boot:
                                     # 24,000 + 5,120 MiB, settles at 2.01 GiB free against
                                     # 209.19 MiB, ceiling 30,969 MiB
    model = EngineModel(shape)       # pure
    model.ledger_text()              # the boot ledger radiance would print
    model.boots                      # BootFigures: arena, claimable, per-card free/floor/ceiling, ...
    model.refused                    # True when the boot ends in 'E startup stopped: ...'

    async with SimEndpoint(shape, behaviour=Behaviour(), time_scale=0.001) as ep:
        ep.url                       # "http://127.0.0.1:PORT": /v1/completions, /v1/chat/completions,
                                     # /v1/models, /health
        ep.behaviour.timings = "null_rates"    # "full" | "null_rates" | "missing"; live
        # Behaviour(thinking_default=True, timings="full", prefix_cache=True, truncate_head=False,
        #           shrink_max_tokens=None, fail_status=None, hang=False)
        await ep.restart()           # a new engine process on the same port; the prefix cache survives
        await ep.restart(new_shape)  # a redeploy: a new boot appended to ep.ledger_path
        ep.requests                  # RequestRecord per request: prompt_tokens, prefill_tokens (paid),
                                     # cached_tokens, completion_tokens, status, refusal, queued, ...
        ep.peak_in_flight            # never above the shape's seqs

    count_tokens(text)               # the deterministic tokenizer (2.7617 chars/token; 2.5714 for
                                     # the "quick brown fox" filler); fox_filler(n, head="MARKER\n")
                                     # is head + filler of exactly n tokens

    async with SimFleet.start(tmp_path) as fleet:   # two hosts, five services (fleet.DEFAULT_SERVICES)
        fleet.config_path            # fleet TOML for `radiance-mcp serve --config`
        fleet.services               # name -> SimService (shape, log_path, env_path, url, endpoint)
        fleet.endpoints              # name -> SimEndpoint
        await fleet.redeploy("frank-archon", new_shape)

Timings in responses are the simulated engine's clock; wall time is that times time_scale.
Modules: engine (the pure boot model), tokenizer, serving (pure request decisions),
endpoint (HTTP), fleet, calibration (the simulator's own
assumptions; the seed's measured figures live in radiance_mcp.core.constants).

Imports: the simulator sits beside the server and imports only the core (ledger, capacity,
units, constants, errors) and the engines' refusal wording (core.wording); never I/O,
tools, MCP or CLI code (tests/test_layers.py holds it). The demo that walks a person through it,
``radiance-mcp demo``, is a client of the server and lives in app/demo.py.
"""

from radiance_mcp.sim.endpoint import RequestRecord, SimEndpoint
from radiance_mcp.sim.engine import BootFigures, CardFigures, EngineModel, Shape, boot_figures
from radiance_mcp.sim.fleet import DEFAULT_SERVICES, ServiceSpec, SimFleet, SimHost, SimService
from radiance_mcp.sim.serving import OVER_WINDOW, Behaviour, TimingsMode
from radiance_mcp.sim.tokenizer import count_tokens, fox_filler, keep_tail

__all__ = [
    "DEFAULT_SERVICES",
    "OVER_WINDOW",
    "Behaviour",
    "BootFigures",
    "CardFigures",
    "EngineModel",
    "RequestRecord",
    "ServiceSpec",
    "Shape",
    "SimEndpoint",
    "SimFleet",
    "SimHost",
    "SimService",
    "TimingsMode",
    "boot_figures",
    "count_tokens",
    "fox_filler",
    "keep_tail",
]
