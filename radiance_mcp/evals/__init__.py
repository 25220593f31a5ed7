"""Evals: score any agent's run against the procedures.

    scenario.py  Scenario, load_scenario, load_scenarios: a question, its facts, its rules, its fleet
    record.py    RECORD_VERSION, Event, read_record, Recorder (the server's --record writer), the binding's
                 nonce digest, line MACs and checks (Binding)
    rules.py     RULES: every rule named once, with how a run is caught breaking it
    score.py     score(scenario, events, answer) -> Report; render_table
    fleet.py     scenario_fleet(scenario): the simulated fleet, as a config file; its fingerprint (edge)
    binding.py   bind(scenario, events, nonce=...): a record checked against the scenario's fleet: complete,
                 its fleet, its nonce, its ledger calls replayed, its probes' requests (edge)
    agents.py    the scripted agents (reference.py, faulty.py): the reference and one faulty agent per rule
                 (edge, MCP client)
    variants.py  perturbed scenarios written from the simulator's own parameters (python -m ...variants)
    run.py       run a scripted agent on a scenario in one process, scored (edge)
    command.py   radiance-mcp eval: the tables, the JSON and the exit status (edge)
    calibrate.py the labelled runs (tests/evals/calibration), scored: the scorer's false-negative and
                 false-positive rates and a per-rule confusion matrix (eval --calibrate)
    versions.py  the scorer's version and the scenario set's (a digest of its files): every report names both
    inspect_task.py  the Inspect AI task, solver and scorer (edge; needs the evals extra)

scenario, rules, score and variants are pure (no MCP, no I/O beyond reading a scenario file), and so is
calibrate but for binding the labelled runs' records (evals.binding); the rest sits at the edge. The format
of records and scenarios is in evals/README.md.
"""
