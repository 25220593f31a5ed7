"""radiance-mcp: the radiance resize and step-shape audit procedures as MCP tools.

What lives where, and which way imports go (tests/test_layers.py holds it)::

    core (pure: text and numbers in, records out; no file, network, MCP or CLI)
        constants   the seed's figures and the limits on tool arguments, one home each
        errors      the one error tree
        units       "2.01 GiB" -> MiB and back
        ledger      the phrase table and the boot reader (text in)
        capacity    ceiling, reserves, pool contract, slab slope, arms
        step_shape  the step-shape audit's row-by-row diff
        argv        the dry-run proof: two printed argv, byte for byte
        serve_script/  which mode carries its own shaped number: lexer, parser, sourcing,
                    tracing, check
        engines/    boot ledgers of vLLM, SGLang and llama.cpp
      <- I/O (reads files, hosts and endpoints; bounded, off the event loop)
        ledger_file/  a boot out of a ledger file, streaming: block search and scan,
                    the per-file index and read state, the reads
        sources, remote, offload   where ledger and script text come from: local, SSH
        probes/     live probes of a serving endpoint over httpx
      <- tools (one module per family of tools: its inputs, outputs and registration)
      <- MCP and CLI (server, cli, __main__)

    sim/  the simulated radiance, beside the server: it imports only the core (and the
          engines' refusal wording in probes.dialects), never I/O, tools, MCP or CLI;
          sim/demo.py drives the server from outside, over stdio.
"""

__version__ = "0.1.0"
