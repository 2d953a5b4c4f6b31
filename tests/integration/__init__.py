"""Integration tests: the worker and its commands against a real broker."""
