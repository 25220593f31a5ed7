"""radiance-mcp: the radiance resize and step-shape audit procedures as MCP tools.

The layers, one folder each; imports point down this list and never back up
(tests/test_layers.py holds every arrow)::

    core/     pure: text and numbers in, frozen records out; no file, network, MCP, CLI or pydantic
        constants, errors, units   the seed's figures and limits, the one error tree, MiB and GiB
        boot                       the one model of a boot for every engine: Boot, its cards, Figure, Refusal
        ledger, budget             radiance's phrase table, its boot reader and budget reading
        engine_facts               each engine's knobs: the KV flag, the floor, the seats, the rate's source
        engines/                   the boot ledgers of vLLM, SGLang and llama.cpp
        rules/                     the ceiling of every engine, the pool contract by the rule of the
                                   engine's rate, whether a boot settled, reserves, what a probe may ask
                                   of a boot, the probes' verdicts, the rules on every word sent to a host
        planning                   what the free VRAM can buy; arms against their noise
        audit/                     the step-shape audit, the dry-run argv proof, serve-script reading
        gates, svg                 env and bats text from a plan; its picture
        wording/                   the engines' refusal wording and the probes' payloads, as text
    models/   pydantic inputs and outputs of the tools (the MCP and CLI boundary); import the core
    sources/  what reads from outside: the fleet config and runtime, local ledger files from the end,
              SSH (remote/), serve scripts, the offload of reads and parses from the event loop
    probes/   live endpoints over httpx: the client, token count, boundary, decode
    tools/    one module per family: read, ask the core, shape the output
    app/      the MCP server, the CLI, the published tools/list, argument checking, HTTP limits,
              the skills, the demo (which drives the server from outside, over stdio)

    sim/      beside them: the simulated radiance; imports the core alone
    evals/    beside them: scenarios, record, scorer, scripted agents, the Inspect task; imports the
              core, models (submit_answer's answer), sources, sim and the app's server
"""

__version__ = "0.1.0"
