"""Suite-wide settings.

A daemon started without ``--state`` keeps its state database under
``$STATE_DIRECTORY`` (see :mod:`smroute.service.settings`); every test gets its
own, so no test writes the machine's ``/var/lib/smroute`` or shares a database
(and its lock) with another test.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_state_directory(tmp_path_factory: pytest.TempPathFactory,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path_factory.mktemp("smroute-state")))
