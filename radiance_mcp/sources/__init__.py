"""What reads from outside, bounded and off the event loop.

config (the fleet file), runtime (the fleet and the SSH pool a call shares), offload (reads and
parses in worker threads), ledger_file/ (a boot out of a local ledger file, from the end), ledgers
(where radiance's ledger text comes from, and the path rules), engine_logs (the other engines'
logs), scripts (serve scripts, env files, dry runs), remote/ (SSH: the hosts' programs and pool).
"""
