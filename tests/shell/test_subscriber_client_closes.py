"""A subscriber client whose broker is away closes every client it made: the error reaches the
caller, and no "Unclosed AIOKafkaProducer/Consumer" follows it (issue 19: those lines were part
of the traceback a newcomer saw). No broker is needed: nothing listens on the address."""

from __future__ import annotations

import asyncio
import gc
import socket
import warnings

import pytest

from app.shell.cli.subscriber_client import SubscriberClient
from app.shell.settings import load_settings


def _dead_address() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _unclosed(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "Unclosed" in str(w.message)]


async def test_surfaces_closes_its_clients_when_the_broker_is_away() -> None:
    client = SubscriberClient(_dead_address(), "sub-away", settings=load_settings({}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(Exception):  # noqa: B017 - aiokafka's connection error, any kind
            async for _ in client.surfaces(asyncio.Event()):
                pass
        gc.collect()
    assert _unclosed(caught) == []


async def test_a_registry_write_closes_its_producer_when_the_broker_is_away() -> None:
    client = SubscriberClient(_dead_address(), "sub-away", settings=load_settings({}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(Exception):  # noqa: B017
            await client.unregister()
        gc.collect()
    assert _unclosed(caught) == []
