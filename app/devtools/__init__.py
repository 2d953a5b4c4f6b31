"""Developer tooling that uses the product: the benchmarks (``a2ui-stream bench``), the fault
scenarios and their kit, the soak (``a2ui-stream soak``).

May import anything of the product. The product never imports it: only app.shell.cli
reaches it, by imports inside the functions that run those commands
(tests/shell/test_layers.py).
"""
