"""The I/O shell: settings, the broker harness, topics, the Faust app, web views and the CLI.

It decodes bytes, calls one core function, and performs the sends the core returns.
"""
