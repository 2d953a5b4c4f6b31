"""Settings: every variable is documented in the README, and bad values say what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.shell.errors import OperatorError
from app.shell.settings import VARIABLES, load_settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.mark.parametrize("name", [name for name, _, _ in VARIABLES])
def test_every_variable_is_in_the_readme_table(name: str) -> None:
    assert f"| `{name}` |" in README


def test_defaults_are_production_defaults() -> None:
    settings = load_settings({})
    assert settings.partitions == 6 and settings.replication == 1
    assert settings.fast_groups is False
    assert settings.floor == 2 and settings.strictness == "warn"
    assert settings.topic_prefix == "a2ui."


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"A2UI_STREAM_PARTITIONS": "many"}, "A2UI_STREAM_PARTITIONS='many' is not an integer"),
        ({"A2UI_STREAM_PARTITIONS": "0"}, "A2UI_STREAM_PARTITIONS=0 is out of range"),
        ({"A2UI_STREAM_STRICTNESS": "lenient"}, "A2UI_STREAM_STRICTNESS='lenient' must be one of"),
        ({"A2UI_STREAM_FLOOR": "3"}, "A2UI_STREAM_FLOOR=3 is out of range"),
        ({"A2UI_STREAM_BROKER": "rabbitmq"}, "A2UI_STREAM_BROKER='rabbitmq' must be one of"),
        ({"A2UI_STREAM_ROLES": "validator,router"}, "A2UI_STREAM_ROLES='validator,router'"),
        ({"A2UI_STREAM_ROLES": " , "}, "A2UI_STREAM_ROLES=' , '"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(OperatorError, match=fragment.replace("[", r"\[")):
        load_settings(env)


def test_roles_default_to_both_stages() -> None:
    assert load_settings({}).roles == frozenset({"validator", "projector"})
    assert load_settings({"A2UI_STREAM_ROLES": "Projector"}).roles == frozenset({"projector"})
