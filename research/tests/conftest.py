"""The research scripts' tests: every one is ``integration`` (an
investigation's check, not the fast tier)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "research" in item.path.parts:
            item.add_marker(pytest.mark.integration)
