"""Shell tests: the loops, stores and handlers against in-memory doubles."""
