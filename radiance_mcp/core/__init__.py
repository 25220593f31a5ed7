"""The pure core: text and numbers in, frozen records out.

Nothing here reads a file, opens a connection, imports MCP, pydantic or the CLI, or imports
another layer of the package (tests/test_layers.py holds it); the sources hand it text, the
tools shape what it returns. Its folders: engines/ (other engines' ledgers), rules/, audit/,
wording/; its modules: constants, errors, units, ledger, budget, planning, gates, svg.
"""
