"""Where the throws run: a local process pool, or a Dask distributed cluster.

:func:`run_unordered` submits ``fn(item)`` for every item and yields
``(item, result, error)`` as tasks finish (``error`` is ``None`` on success,
else the text of what went wrong -- a crashed worker is a failed task, not a
crashed study).  ``scheduler=None`` uses a
:class:`~concurrent.futures.ProcessPoolExecutor` with ``workers`` processes
(``spawn`` start method: workers start clean, without the parent's threads);
``scheduler="tcp://host:port"`` connects a :class:`distributed.Client` to an
existing Dask scheduler (``dask scheduler`` + ``dask worker`` on the
machines); a :class:`distributed.Client` or ``LocalCluster`` object may be
passed instead of an address.  ``fn`` must be importable (module level).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from smroute.errors import SmrouteError

__all__ = ["run_unordered"]

T = TypeVar("T")
R = TypeVar("R")


def _err(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _local(fn: Callable[[T], R], items: Sequence[T], workers: int
           ) -> Iterator[tuple[T, R | None, str | None]]:
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max(1, workers), mp_context=ctx) as ex:
        futs = {ex.submit(fn, it): it for it in items}
        try:
            for fut in cf.as_completed(futs):
                it = futs[fut]
                try:
                    yield it, fut.result(), None
                except Exception as exc:  # noqa: BLE001 - recorded, not raised
                    yield it, None, _err(exc)
        finally:
            for f in futs:
                f.cancel()


def _dask(fn: Callable[[T], R], items: Sequence[T], scheduler: Any
          ) -> Iterator[tuple[T, R | None, str | None]]:
    try:
        from distributed import Client, as_completed
    except ImportError as err:  # pragma: no cover - dask is a dependency
        raise SmrouteError("the Dask executor needs dask[distributed] "
                           "(pip install 'dask[distributed]')") from err
    own = isinstance(scheduler, str)
    try:
        client = Client(scheduler, timeout=30) if own else (
            scheduler if isinstance(scheduler, Client) else Client(scheduler))
    except OSError as err:
        raise SmrouteError(f"cannot reach the Dask scheduler {scheduler}: {err}") from err
    try:
        futs = [client.submit(fn, it, pure=False, key=f"smroute-throw-{i}-{id(items)}")
                for i, it in enumerate(items)]
        index = {f.key: i for i, f in enumerate(futs)}
        for fut in as_completed(futs):
            it = items[index[fut.key]]
            try:
                yield it, fut.result(), None
            except Exception as exc:  # noqa: BLE001 - recorded, not raised
                yield it, None, _err(exc)
    finally:
        if own or not isinstance(scheduler, Client):
            client.close()


def run_unordered(fn: Callable[[T], R], items: Sequence[T], *, workers: int = 2,
                  scheduler: Any = None) -> Iterator[tuple[T, R | None, str | None]]:
    """``(item, fn(item) or None, error or None)`` in completion order."""
    if not items:
        return iter(())
    if scheduler is None:
        return _local(fn, items, workers)
    return _dask(fn, items, scheduler)
