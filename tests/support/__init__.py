"""Test helpers shared across the suite: one module per job (ports, servers, clients, RSS).

Imported as the top-level package `support`: pytest puts `tests/` on `sys.path` for the
rootdir conftest, and reference servers in subprocesses get the same path."""
