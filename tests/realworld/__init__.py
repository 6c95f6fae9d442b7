"""The TechEmpower-style apps on a PostgreSQL cluster of the tests' own (issue 35): the
cluster, the apps, the output checks, and the test that runs them on our servers. A package,
so `python -m realworld.postgres_cluster` runs from tests/ (for benches and measuring)."""
