"""Coverage-guided fuzzing of every parser a client or an app reaches (make fuzz), and the
replay of the kept corpora as regression tests (make test)."""
