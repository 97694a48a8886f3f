"""Suite-wide settings.

A daemon started without ``--state`` keeps its state database under
``$STATE_DIRECTORY`` (see :mod:`smroute.service.settings`); every test gets its
own, so no test writes the machine's ``/var/lib/smroute`` or shares a database
(and its lock) with another test.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_state_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "smroute-state"
    state.mkdir()
    monkeypatch.setenv("STATE_DIRECTORY", str(state))
