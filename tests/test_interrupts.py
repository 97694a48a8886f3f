"""SIGTERM as an interrupt (``smroute.interrupts``), as the CLI and the
benchmarks use it."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from smroute.interrupts import Terminated, sigterm_interrupts


def test_sigterm_raises_within_the_block_and_the_handler_is_restored() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with pytest.raises(Terminated), sigterm_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # (the handler raises before this returns)
        assert issubclass(Terminated, KeyboardInterrupt)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_off_the_main_thread_the_handlers_stay() -> None:
    before = signal.getsignal(signal.SIGTERM)
    during: list[object] = []

    def run() -> None:
        with sigterm_interrupts():
            during.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert during == [before]
