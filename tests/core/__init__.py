"""Core tests: the pure decisions, as tables, golden files and laws (no I/O, no broker)."""
