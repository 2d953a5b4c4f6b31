"""The viewer's pure JavaScript core (viewer/src/core: patch, schema checks, the RFC 0209
migration map, the apply-and-revalidate state, the component-tree check that keeps cycles from
the renderer) under Node's own test runner. Needs only
Node.js (no npm packages): skipped without it on a laptop, a failure in CI."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.integration.browser_kit import VIEWER, in_ci


def test_viewer_core_passes_its_node_tests() -> None:
    node = shutil.which("node")
    if node is None:
        if in_ci():
            pytest.fail("Node.js is not installed; CI runs the viewer's unit tests")
        pytest.skip("Node.js is not installed (the viewer's unit tests run under node --test)")
    result = subprocess.run(
        [node, "--test", "test/"], cwd=VIEWER, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "# fail 0" in result.stdout
