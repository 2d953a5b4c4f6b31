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


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.2", "a2ui.example", ""])
def test_auth_off_on_a_non_loopback_bind_is_refused(host: str) -> None:
    """Issue 14 item 4: no token and every interface would serve every run to the network."""
    env = {"A2UI_STREAM_HTTP_AUTH": "off", "A2UI_STREAM_WEB_HOST": host}
    with pytest.raises(OperatorError) as refused:
        load_settings(env)
    message = str(refused.value)
    assert "\n" not in message  # one line, saying what to do
    assert "A2UI_STREAM_WEB_HOST=127.0.0.1" in message and "A2UI_STREAM_HTTP_AUTH=on" in message


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_auth_off_on_a_loopback_bind_is_the_laptop_mode(host: str) -> None:
    settings = load_settings({"A2UI_STREAM_HTTP_AUTH": "off", "A2UI_STREAM_WEB_HOST": host})
    assert settings.http_auth is False and settings.web_host == host


def test_auth_on_may_bind_any_address() -> None:
    assert load_settings({"A2UI_STREAM_WEB_HOST": "0.0.0.0"}).http_auth is True


def test_the_worker_app_refuses_an_exposed_laptop_mode_however_settings_were_made() -> None:
    from dataclasses import replace

    from app.shell.worker.faust_app import create_app

    exposed = replace(load_settings({}), http_auth=False, web_host="0.0.0.0")
    with pytest.raises(OperatorError, match="A2UI_STREAM_HTTP_AUTH=off"):
        create_app(exposed, "127.0.0.1:9")


def test_the_read_timeout_is_bounded() -> None:
    assert load_settings({}).http_read_timeout_seconds == 15
    with pytest.raises(OperatorError, match="A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS=0"):
        load_settings({"A2UI_STREAM_HTTP_READ_TIMEOUT_SECONDS": "0"})


def test_the_tokens_file_setting_is_a_path_read_as_set() -> None:
    """Issue 18: A2UI_STREAM_HTTP_TOKENS_FILE names the tokens file; the path is shown by
    `a2ui-stream config` (a *_FILE is not a secret), its content never is."""
    from app.shell.settings import shown_value

    assert load_settings({}).http_tokens_file == ""
    settings = load_settings({"A2UI_STREAM_HTTP_TOKENS_FILE": " /etc/a2ui/tokens.json "})
    assert settings.http_tokens_file == "/etc/a2ui/tokens.json"
    assert (
        shown_value("A2UI_STREAM_HTTP_TOKENS_FILE", "/etc/a2ui/tokens.json", "")
        == "/etc/a2ui/tokens.json (set)"
    )
