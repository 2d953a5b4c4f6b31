"""The tests, in three tiers: core (pure), shell (in-memory doubles), integration (a broker)."""
