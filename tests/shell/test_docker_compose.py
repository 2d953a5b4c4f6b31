"""docker-compose.yml and the Dockerfile, checked against what `make install` does (issue 19
item 8): no Docker engine runs where the tests do, so the files are read as data. The image
builds the viewer in a Node stage from the committed lockfile, installs a2ui-stream editable
and compiles the admission core in a Python stage, and runs as an unprivileged user; compose
runs only real a2ui-stream commands on a pinned Apache Kafka, takes the worker's token from the
environment, and publishes the ports the README names.

Before: one Python stage that neither built the viewer (/ui/ said it was not built) nor
compiled the core, ran as root, installed a2ui-stream non-editable (so its topics/ and
schemas/ were looked up beside site-packages), and the compose worker had no token, so every
run endpoint answered 401."""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from app.shell.cli import build_parser
from app.shell.cli.broker import APACHE_KAFKA_IMAGE

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def runs(self) -> str:
        return "\n".join(self.all("RUN"))

    def copies(self) -> list[tuple[str | None, list[str], str]]:
        """(--from stage or None, sources, destination) of every COPY."""
        found = []
        for args in self.all("COPY"):
            words = shlex.split(args)
            origin = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
            paths = [w for w in words if not w.startswith("--")]
            found.append((origin, paths[:-1], paths[-1]))
        return found


def _dockerfile() -> tuple[dict[str, str], list[Stage]]:
    text = (ROOT / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = "\n".join(lines).replace("\\\n", " ")
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in joined.splitlines():
        if not line.strip():
            continue
        keyword, _, rest = line.strip().partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            words = rest.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], words[0])
            stages.append(Stage(image, words[2] if len(words) > 2 else None))
        else:
            stages[-1].instructions.append((keyword, rest))
    return args, stages


def _stage(stages: list[Stage], name: str) -> Stage:
    [stage] = [s for s in stages if s.name == name]
    return stage


def _makefile_list(variable: str) -> list[str]:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    [value] = re.findall(rf"^{variable} :=(.*)$", text, flags=re.M)
    return value.split()


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _entrypoint() -> list[str]:
    _, stages = _dockerfile()
    return yaml.safe_load(stages[-1].all("ENTRYPOINT")[-1])


def test_broker_image_is_pinned_apache_kafka() -> None:
    image = _compose()["services"]["kafka"]["image"]
    assert image == APACHE_KAFKA_IMAGE  # the same version the local harness runs
    assert ":" in image and not image.endswith(":latest")


@pytest.mark.parametrize("service", ["topics", "worker"])
def test_every_command_is_a_real_a2ui_stream_command(service: str) -> None:
    spec = _compose()["services"][service]
    assert "build" in spec, "the service must run our image"
    assert _entrypoint() == ["a2ui-stream"]
    args = spec["command"]
    parsed = build_parser().parse_args(args)  # argparse exits on an unknown command
    assert callable(parsed.func)


def test_services_have_healthchecks_and_order() -> None:
    services = _compose()["services"]
    assert "healthcheck" in services["kafka"] and "healthcheck" in services["worker"]
    assert "6066/health" in " ".join(services["worker"]["healthcheck"]["test"])
    assert services["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert (
        services["worker"]["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    )


def test_the_viewer_is_built_in_a_node_stage_as_make_viewer_does() -> None:
    _, stages = _dockerfile()
    viewer = _stage(stages, "viewer")
    image, _, tag = viewer.image.partition(":")
    assert image == "node" and tag
    engines = __import__("json").loads((ROOT / "viewer" / "package.json").read_text())
    low = tuple(int(x) for x in re.findall(r"\d+", engines["engines"]["node"])[:2])
    have = tuple(int(x) for x in re.findall(r"\d+", tag)[:2])
    assert have >= low, f"{viewer.image} is older than the viewer's engines.node"
    # the Makefile's viewer target: npm ci (the committed lockfile) then npm run build
    assert "npm ci --no-audit --no-fund" in viewer.runs() and "npm run build" in viewer.runs()
    copied = [src for _, sources, _ in viewer.copies() for src in sources]
    for source in _makefile_list("VIEWER_SOURCES"):  # every input of make's viewer build
        if "$(wildcard" in source:
            continue
        assert any(source == c or source.startswith(c.rstrip("/") + "/") for c in copied), source
    assert "viewer/src" in copied  # the wildcard's directory


def test_the_core_is_installed_editable_and_compiled_as_make_install_does() -> None:
    _, stages = _dockerfile()
    core = _stage(stages, "core")
    image, _, tag = core.image.partition(":")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert image == "python" and tag.startswith("3.11")
    assert project["requires-python"].startswith(">=3.11")
    runs = core.runs()
    assert "pip install --no-cache-dir -e ." in runs  # make install: pip install -e
    assert "gcc" in runs  # mypyc needs a C compiler
    [mypy] = [d for d in project["optional-dependencies"]["dev"] if d.startswith("mypy")]
    assert f"'{mypy}'" in runs  # the dev extra's pin
    assert "python scripts/compile_core.py" in runs  # the Makefile's compile target
    assert "test -f app/core/compiled.json" in runs  # a silent fallback fails the build
    assert "CORE_BUILD == 'compiled'" in runs
    copied = [src for _, sources, _ in core.copies() for src in sources]
    for needed in ("pyproject.toml", "app", "schemas", "topics", "scripts/compile_core.py"):
        assert needed in copied, needed
    assert ("viewer", ["/srv/a2ui-stream/app/viewer_dist"], "./app/viewer_dist") in core.copies()


def test_the_image_runs_as_an_unprivileged_user_with_what_was_built() -> None:
    _, stages = _dockerfile()
    final = stages[-1]
    assert final.name is None and final.image == _stage(stages, "core").image
    [user] = final.all("USER")
    assert user not in ("root", "0") and "useradd" in final.runs()
    origins = {(o, tuple(s), d) for o, s, d in final.copies()}
    # the venv and the source tree at the paths they were built at (the editable finder
    # points at /srv/a2ui-stream)
    assert ("core", ("/opt/venv",), "/opt/venv") in origins
    assert ("core", ("/srv/a2ui-stream",), "/srv/a2ui-stream") in origins
    env = " ".join(final.all("ENV"))
    assert "A2UI_STREAM_WEB_HOST=0.0.0.0" in env and "/opt/venv/bin" in env
    assert all(
        "A2UI_STREAM_HTTP_TOKENS" not in e for s in stages for e in s.all("ENV")
    )  # no token baked in
    assert final.all("EXPOSE") == ["6066"]


def test_dockerignore_keeps_host_builds_out() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    for path in (
        "app/core/*.so",
        "app/core/compiled.json",
        "app/viewer_dist",
        ".venv",
        "viewer/node_modules",
    ):
        assert path in ignored, path


def test_the_worker_takes_its_token_from_the_environment_and_the_readme_says_how() -> None:
    worker = _compose()["services"]["worker"]
    assert worker["environment"]["A2UI_STREAM_HTTP_TOKENS"] == "${A2UI_STREAM_HTTP_TOKENS:-}"
    assert "A2UI_STREAM_HTTP_AUTH" not in worker["environment"]  # tokens stay required
    readme = (ROOT / "README.md").read_text()
    docker = readme[readme.index("## Docker") :].split("\n## ")[0]
    assert "export A2UI_STREAM_HTTP_TOKENS=" in docker and "docker compose up" in docker
    assert "Authorization: Bearer" in docker


def test_the_ports_are_those_the_readme_names() -> None:
    services = _compose()["services"]
    assert services["kafka"]["ports"] == ["127.0.0.1:9092:9092"]
    assert services["worker"]["ports"] == ["127.0.0.1:6066:6066"]
    assert services["worker"]["environment"]["A2UI_STREAM_WEB_PORT"] == "6066"
    readme = (ROOT / "README.md").read_text()
    docker = readme[readme.index("## Docker") :].split("\n## ")[0]
    assert "localhost:9092" in docker and "localhost:6066" in docker
