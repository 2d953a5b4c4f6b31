"""The pure core: every decision and data transformation, with no I/O.

May import: the standard library (no clocks, randomness, env, files, sockets, asyncio),
orjson, jsonschema_rs. Never faust, mode, aiokafka or app.shell (checked by
tests/core/test_purity.py). Time, ids and loaded schema documents come in as arguments.
"""
