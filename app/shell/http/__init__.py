"""The HTTP room: the dispatcher and handlers of the one route table (app.core.http.routes), the
SSE/poll streams, forwarding to a partition's owner, the admission gateway and the viewer's
pages.

May import: app.core, the shared shell modules, this room and app.shell.worker (the handlers
read what the worker's read side holds: the run index, its store, the ownership map). Never
app.shell.cli or app.devtools (tests/shell/test_layers.py).
"""
