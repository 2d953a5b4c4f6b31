"""``broker_process.free_port``: a port for a listener started later, chosen below the system's
ephemeral range (where outgoing connections take their ports) when there is room there."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from app.shell.cli.broker_process import ephemeral_start, free_port


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
    return True


def test_a_port_below_the_ephemeral_range(tmp_path: Path) -> None:
    source = tmp_path / "ip_local_port_range"
    source.write_text("32768\t60999\n")
    ports = {free_port(source) for _ in range(20)}
    assert all(16384 <= port < 32768 and _bindable(port) for port in ports)
    assert len(ports) > 1  # drawn, not one fixed port that every caller would race for


@pytest.mark.parametrize("text", [None, "", "not a range", "1024 65535"])
def test_without_room_below_the_range_any_free_port(tmp_path: Path, text: str | None) -> None:
    source = tmp_path / "ip_local_port_range"
    if text is not None:
        source.write_text(text)
    assert _bindable(free_port(source))


def test_a_port_taken_by_a_listener_is_passed_over(tmp_path: Path) -> None:
    source = tmp_path / "ip_local_port_range"
    source.write_text("8194 60999")  # below it: 4097-8193
    held = []
    try:
        for port in range(4097, 8193, 2):  # every other port of the room held by a listener
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            sock.listen()
            held.append(sock)
        taken = {sock.getsockname()[1] for sock in held}
        for _ in range(10):
            port = free_port(source)
            assert port not in taken and _bindable(port)
    finally:
        for sock in held:
            sock.close()


def test_the_range_is_read_from_proc_on_linux() -> None:
    start = ephemeral_start()
    assert start is None or 1 <= start <= 65535
