"""The worker's room: the aiokafka loops as thin drivers (validator, projector, the read
side's run index), their stores, the assignor, the ownership map, Kafka I/O, topic admin,
metrics and the Faust app that hosts them.

May import: app.core, the shared shell modules (app.shell.settings, errors, log_safety,
schema_files, gateway_key, wire, clock) and this room; only ``faust_app`` (the worker
process, which mounts the HTTP routes) also imports app.shell.http. Never app.shell.cli or
app.devtools (tests/shell/test_layers.py).
"""
