"""The routing daemon's durable state: one SQLite database (:class:`StateStore`).

Python's ``sqlite3`` in WAL mode with ``synchronous=FULL``: a transaction
that returned is on disk (the WAL is fsynced at every commit) and survives
``kill -9`` and a power cut; readers (``sqlite3 state.db ".backup x"``) never
block the daemon.  The WAL is checkpointed after each stored epoch (by the
writer thread: a journal write that an ApplyFaults call waits for never pays
for it) and its file kept under 16 MiB.  One daemon per database: a lock file beside it
(``state.db.lock``, ``flock``) keeps a second daemon out.

Tables (schema version :data:`SCHEMA_VERSION` in ``PRAGMA user_version``,
``PRAGMA application_id`` :data:`APPLICATION_ID`; older versions are migrated
step by step with :data:`MIGRATIONS`):

``meta``
    key/value text: the base fabric in force (``base_hash``, ``base_source``,
    ``base_source_sha256``), the routing settings (``algorithm``, ``lmc``),
    ``last_epoch_id`` (the highest id ever committed: ids are never reused).
``fabrics``
    base fabrics by content hash: source description, SHA-256 of the source
    file's bytes (if it came from a file) and the fabric itself
    (:func:`~smroute.service.state.codec.encode_fabric`); the base in force
    and the bases of kept epochs only.
``epochs``
    the last ``keep_epochs`` committed epochs: metadata (JSON), the down set
    in force, the journal position it includes, the compressed tables and
    their SHA-256, the validation result, the instance that committed it.
``journal``
    fault events of acknowledged ``ApplyFaults`` calls not yet in a stored
    epoch (``seq`` ascending), written before the call is answered.

Every row carries a checksum (:mod:`smroute.service.state.salvage`), all checked
with ``PRAGMA integrity_check`` at every open, each again on read (a bad
row is skipped and noted in :attr:`StateStore.damage`, never a crash).  A
database that is damaged, not smroute's, or of a newer schema is logged,
renamed ``state.db.corrupt-YYYYmmddTHHMMSS`` (with its ``-wal`` and
``-shm``) and replaced by a new one holding the damaged file's rows whose
checksums hold (none from a foreign or newer file).  A database that cannot
be opened or written at all (permissions, full disk) is a
:class:`StateError`.  No routing here: rows in, rows out.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from smroute.errors import SmrouteError
from smroute.service.state import salvage as sv

__all__ = [
    "APPLICATION_ID",
    "EpochRow",
    "FabricRow",
    "JournalRow",
    "MIGRATIONS",
    "SCHEMA_V1",
    "SCHEMA_VERSION",
    "StateError",
    "StateStore",
]

#: ``PRAGMA application_id`` of an smroute state database ("SmRt").
APPLICATION_ID = 0x536D5274
#: The schema version this code writes.
SCHEMA_VERSION = 3
#: The first schema (version 1); a new database is made by it and then migrated.
SCHEMA_V1: tuple[str, ...] = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE fabrics(hash TEXT PRIMARY KEY, source TEXT NOT NULL, "
    "source_sha256 TEXT NOT NULL, data BLOB NOT NULL, stored_at REAL NOT NULL)",
    "CREATE TABLE epochs(id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL, "
    "base_hash TEXT NOT NULL, meta TEXT NOT NULL, down TEXT NOT NULL, "
    "journal_seq INTEGER NOT NULL, tables BLOB NOT NULL, tables_sha256 TEXT NOT NULL, "
    "committed_at REAL NOT NULL)",
    "CREATE TABLE journal(seq INTEGER PRIMARY KEY AUTOINCREMENT, base_hash TEXT NOT NULL, "
    "kind TEXT NOT NULL, guid TEXT NOT NULL, port INTEGER NOT NULL, received_at REAL NOT NULL)",
)
#: Version ``n`` -> the statements that bring a database from ``n`` to ``n + 1``.
#: 1 -> 2: the instance that committed an epoch, and its validation result.
#: 2 -> 3: a checksum on every row (existing rows get theirs as migrated).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("ALTER TABLE epochs ADD COLUMN instance TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE epochs ADD COLUMN validation TEXT NOT NULL DEFAULT '\"pending\"'"),
    2: tuple(f"ALTER TABLE {t} ADD COLUMN crc TEXT NOT NULL DEFAULT ''" for t in sv.COLUMNS),
}
#: One query per table naming every column this version reads (a schema check).
_COLUMNS = tuple(f"SELECT {', '.join(c)}, crc FROM {t}" for t, c in sv.COLUMNS.items())
#: SQLite result codes that come from the host (permissions, disk, locks);
#: any other error while the file is checked means it is damaged.
_HOST = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_FULL", "SQLITE_IOERR",
         "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_NOMEM", "SQLITE_AUTH")

T = TypeVar("T")
LogFn = Callable[..., None]


def _no_log(level: str, event: str, **fields: Any) -> None:
    return None


class StateError(SmrouteError):
    """The state database cannot be used (in use by another daemon, not
    writable, disk full); the message names the file."""


class _Unusable(Exception):
    """Corrupt, foreign or too new: move it aside and start afresh (with the
    rows that can be salvaged if ``damaged``)."""

    def __init__(self, why: str, damaged: bool = False) -> None:
        super().__init__(why)
        self.damaged = damaged


@dataclass(frozen=True)
class FabricRow:
    """A stored base fabric: content hash, source, SHA-256 of the source file's
    bytes (``""`` if none) and the encoded fabric."""

    hash: str
    source: str
    source_sha256: str
    data: bytes


@dataclass(frozen=True)
class EpochRow:
    """A stored epoch (see the ``epochs`` table); ``meta`` decoded from JSON,
    ``down`` and ``validation`` still JSON text."""

    id: int
    parent_id: int
    instance: str
    base_hash: str
    meta: dict[str, Any]
    down: str
    journal_seq: int
    tables: bytes
    tables_sha256: str
    validation: str
    committed_at: float


@dataclass(frozen=True)
class JournalRow:
    """One journaled fault event: position, base fabric hash, kind, node GUID, port."""

    seq: int
    base_hash: str
    kind: str
    guid: int
    port: int


class StateStore:
    """The state database at ``path`` (see module doc), opened (created,
    migrated, or moved aside and rebuilt) by the constructor.  Thread-safe:
    one connection, one transaction at a time.  ``keep_epochs``: epochs kept;
    ``wallclock`` stamps rows and the moved-aside name; ``lock_timeout``:
    seconds to wait for another daemon to release the database."""

    def __init__(self, path: str | os.PathLike[str], *, keep_epochs: int = 8,
                 log: LogFn = _no_log, wallclock: Callable[[], float] = time.time,
                 lock_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.keep_epochs = keep_epochs
        self.log = log
        self.wallclock = wallclock
        self.moved_aside: Path | None = None
        #: what was found damaged (rows skipped, the file moved aside), in order
        self.damage: list[str] = []
        #: rows salvaged from a file moved aside, and rows dropped there
        self.salvaged = (0, 0)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as err:
            raise StateError(f"state database {self.path}: cannot create its directory: "
                             f"{err.strerror or err}") from None
        self._lock_fd = self._take_lock(lock_timeout)
        try:
            with contextlib.suppress(FileExistsError):  # private: it holds the fabric
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                                 0o600))
            try:
                self._db = self._connect()
            except _Unusable as err:
                saved = sv.salvage(self.path) if err.damaged else None
                self._move_aside(str(err))
                self._db = self._connect()
                if saved is not None:
                    self._restore(saved)
        except BaseException:
            os.close(self._lock_fd)
            raise

    # ------------------------------------------------------------ opening
    def _take_lock(self, timeout: float) -> int:
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as err:
            raise StateError(f"state database {self.path}: cannot open {lock}: "
                             f"{err.strerror or err}") from None
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                    os.close(fd)
                    raise StateError(
                        f"state database {self.path} is in use by another smroute daemon"
                        + (f" (pid {holder})" if holder else "")
                        + "; give each daemon its own state.path") from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                 timeout=30.0)
        except sqlite3.Error as err:
            raise StateError(f"state database {self.path}: cannot open: {err}") from None
        db.text_factory = sv.text
        try:
            self._prepare(db)
        except (sqlite3.DatabaseError, ValueError) as err:  # (a garbled message: ValueError)
            db.close()
            if not getattr(err, "sqlite_errorname", "").startswith(_HOST):
                raise _Unusable(f"damaged: {err}", True) from None
            raise StateError(f"state database {self.path}: {err}") from None
        except BaseException:
            db.close()
            raise
        return db

    def _prepare(self, db: sqlite3.Connection) -> None:
        # identify the file before anything is written to it
        check = db.execute("PRAGMA integrity_check(20)").fetchall()
        if check != [("ok",)]:
            raise _Unusable(f"integrity check failed: {check[0][0]}", True)
        app = db.execute("PRAGMA application_id").fetchone()[0]
        ver = db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if (app, ver, tables) != (0, 0, 0):
            if app != APPLICATION_ID:
                raise _Unusable(f"not an smroute state database (application_id {app:#x})")
            if not 1 <= ver <= SCHEMA_VERSION:
                raise _Unusable(f"schema version {ver}; this smroute reads 1..{SCHEMA_VERSION}")
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StateError(f"state database {self.path}: cannot use WAL mode (got {mode})")
        db.execute("PRAGMA synchronous=FULL")
        # checkpoints only by put_epoch (the writer thread), never inside a
        # journal write that an ApplyFaults call waits for
        db.execute("PRAGMA wal_autocheckpoint=0")
        db.execute(f"PRAGMA journal_size_limit={16 << 20}")
        if tables == 0 and ver == 0:
            self._create(db)
            ver = 1
        if ver < SCHEMA_VERSION:
            self._migrate(db, ver, quiet=tables == 0)
        try:
            for q in _COLUMNS:
                db.execute(q + " LIMIT 0").fetchall()
        except sqlite3.OperationalError as err:
            raise _Unusable(f"schema version {ver} but {err}", True) from None
        n, named = sv.bad_rows(db)  # every row's checksum, once at start
        if n:
            raise _Unusable(f"{n} rows fail their checksum: {', '.join(named)}", True)

    def _create(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        for stmt in SCHEMA_V1:
            db.execute(stmt)
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute("PRAGMA user_version = 1")
        db.execute("COMMIT")

    def _migrate(self, db: sqlite3.Connection, ver: int, quiet: bool = False) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            for v in range(ver, SCHEMA_VERSION):
                for stmt in MIGRATIONS[v]:
                    db.execute(stmt)
                if v == 2:
                    sv.fill_checks(db)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        if not quiet:  # (a new database is made by the first schema and migrated too)
            self.log("info", "state_db_migrated", path=str(self.path), from_version=ver,
                     to_version=SCHEMA_VERSION)

    def _move_aside(self, why: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self.wallclock()))
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        for suffix in ("-wal", "-shm", ""):
            src = Path(str(self.path) + suffix)
            if src.exists():
                try:
                    os.replace(src, Path(str(aside) + suffix))
                except OSError as err:
                    raise StateError(f"state database {self.path} is unusable ({why}) and "
                                     f"cannot be moved aside: {err.strerror or err}") from None
        self.moved_aside = aside
        self.damage.append(f"the state database was unusable ({why}) and moved to {aside}")
        self.log("error", "state_db_moved_aside", path=str(self.path), moved_to=str(aside),
                 reason=why, message="starting with the rows that can be salvaged")

    def _restore(self, saved: sv.Salvaged) -> None:
        """Put the rows salvaged from the file moved aside into the new one."""
        self._write(lambda db: sv.restore(db, saved))
        n = sum(len(r) for r in saved.rows.values())
        self.salvaged = (n, saved.dropped)
        self.log("warning", "state_db_salvaged", path=str(self.path), rows=n,
                 dropped=saved.dropped)

    def _bad(self, what: str) -> None:
        """Note a damaged row (logged once)."""
        if what not in self.damage:
            self.damage.append(what)
            self.log("error", "state_row_damaged", path=str(self.path), row=what)

    def close(self) -> None:
        """Close the database and release the lock (idempotent)."""
        with self._lock:
            if self._lock_fd < 0:
                return
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            os.close(self._lock_fd)
            self._lock_fd = -1

    # ------------------------------------------------------------ plumbing
    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(db)`` in one IMMEDIATE transaction, durable once this returns."""
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    out = fn(db)
                    db.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as err:
                raise StateError(f"state database {self.path}: cannot write: {err}") from None
            return out

    def _read(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except (sqlite3.Error, ValueError) as err:
                raise StateError(f"state database {self.path}: cannot read: {err}") from None

    # ------------------------------------------------------------ meta and fabrics
    def meta(self) -> dict[str, str]:
        """Every ``meta`` key and value whose checksum holds."""
        out: dict[str, str] = {}
        for k, v, crc in self._read("SELECT key, value, crc FROM meta"):
            if crc == sv.row_check("meta", (k, v)) and isinstance(v, str):
                out[str(k)] = v
            else:
                self._bad(f"meta {str(k)[:40]!r}")
        return out

    def set_meta(self, **values: object) -> None:
        """Set ``meta`` keys (values as text)."""
        self._write(lambda db: _upsert(db, values))

    def put_fabric(self, row: FabricRow) -> None:
        """Make ``row`` the base fabric in force; the journal (events against the
        previous base) is cleared in the same transaction."""
        def fn(db: sqlite3.Connection) -> None:
            vals = (row.hash, row.source, row.source_sha256, row.data, self.wallclock())
            db.execute("INSERT OR REPLACE INTO fabrics VALUES (?, ?, ?, ?, ?, ?)",
                       (*vals, sv.row_check("fabrics", vals)))
            db.execute("DELETE FROM journal")
            _upsert(db, {"base_hash": row.hash, "base_source": row.source,
                         "base_source_sha256": row.source_sha256})
            _collect_fabrics(db)
        self._write(fn)

    def fabric(self, content_hash: str) -> FabricRow | None:
        """The stored fabric with ``content_hash``, or ``None`` (also if its row
        is damaged)."""
        rows = self._read("SELECT hash, source, source_sha256, data, stored_at, crc "
                          "FROM fabrics WHERE hash = ?", content_hash)
        if not rows:
            return None
        r = rows[0]
        if r[5] != sv.row_check("fabrics", r[:5]) or not isinstance(r[3], bytes):
            self._bad(f"fabric {content_hash[:12]}")
            return None
        return FabricRow(str(r[0]), str(r[1]), str(r[2]), r[3])

    # ------------------------------------------------------------ journal
    def append_journal(self, base_hash: str, events: Sequence[tuple[str, int, int]],
                       last_epoch_id: int | None = None) -> int:
        """Journal ``events`` (kind, GUID, port) against ``base_hash``; returns the
        last ``seq``.  Durable when it returns."""
        def fn(db: sqlite3.Connection) -> int:
            at = self.wallclock()
            seq = _journal_high(db)
            rows = []
            for k, g, p in events:
                seq += 1
                vals = (seq, base_hash, k, f"{g:#x}", p, at)
                rows.append((*vals, sv.row_check("journal", vals)))
            db.executemany("INSERT INTO journal(seq, base_hash, kind, guid, port, received_at, "
                           "crc) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            if last_epoch_id is not None:
                _upsert(db, {"last_epoch_id": last_epoch_id})
            return seq
        return self._write(fn)

    def journal(self, after_seq: int = 0) -> list[JournalRow]:
        """Journaled events with ``seq > after_seq`` whose rows are intact, oldest first."""
        return self.journal_rows(after_seq)[0]

    def journal_rows(self, after_seq: int = 0) -> tuple[list[JournalRow], int]:
        """:meth:`journal`, and how many damaged rows may lie after ``after_seq``."""
        good, bad = [], 0
        for r in self._read("SELECT seq, base_hash, kind, guid, port, received_at, crc "
                            "FROM journal ORDER BY seq"):
            try:
                if r[6] != sv.row_check("journal", r[:6]):
                    raise ValueError("checksum")
                row = JournalRow(_int(r[0]), str(r[1]), str(r[2]), int(str(r[3]), 16),
                                 _int(r[4]))
            except (ValueError, TypeError):
                self._bad(f"journal seq {str(r[0])[:20]}")
                bad += not isinstance(r[0], int) or r[0] > after_seq
                continue
            if row.seq > after_seq:
                good.append(row)
        return good, bad

    def journal_high(self) -> int:
        """The last journal position ever given (0 if none)."""
        with self._lock:
            try:
                return _journal_high(self._db)
            except sqlite3.Error as err:
                raise StateError(f"state database {self.path}: cannot read: {err}") from None

    # ------------------------------------------------------------ epochs
    def put_epoch(self, row: EpochRow) -> None:
        """Store ``row``, keep the newest ``keep_epochs``, drop the journal rows it
        includes (``seq <= journal_seq``) and fabrics no longer referenced."""
        def fn(db: sqlite3.Connection) -> None:
            vals = (row.id, row.parent_id, row.instance, row.base_hash, json.dumps(row.meta),
                    row.down, row.journal_seq, row.tables, row.tables_sha256, row.validation,
                    row.committed_at)
            db.execute(f"INSERT OR REPLACE INTO epochs({', '.join(sv.COLUMNS['epochs'])}, crc) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (*vals, sv.row_check("epochs", vals)))
            db.execute("DELETE FROM epochs WHERE id NOT IN (SELECT id FROM epochs "
                       "ORDER BY id DESC LIMIT ?)", (self.keep_epochs,))
            db.execute("DELETE FROM journal WHERE seq <= ?", (row.journal_seq,))
            _collect_fabrics(db)
        self._write(fn)
        with self._lock, contextlib.suppress(sqlite3.Error):  # WAL back into the file
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def set_validation(self, epoch_id: int, validation: str) -> None:
        """Record epoch ``epoch_id``'s validation result (JSON), if it is stored
        (and intact)."""
        def fn(db: sqlite3.Connection) -> None:
            for r in db.execute(_EPOCH + " WHERE id = ?", (epoch_id,)).fetchall():
                if r[-1] == sv.row_check("epochs", r[:-1]):
                    vals = (*r[:9], validation, r[10])
                    db.execute("UPDATE epochs SET validation = ?, crc = ? WHERE id = ?",
                               (validation, sv.row_check("epochs", vals), epoch_id))
        self._write(fn)

    def epoch_ids(self) -> list[int]:
        """Ids of the stored epochs, newest first."""
        return [int(r[0]) for r in self._read("SELECT id FROM epochs ORDER BY id DESC")]

    def epoch(self, epoch_id: int) -> EpochRow | None:
        """Stored epoch ``epoch_id`` (``None`` if absent or damaged); a ``meta``
        that is not a JSON object reads as ``{}``."""
        rows = self._read(_EPOCH + " WHERE id = ?", epoch_id)
        if not rows:
            return None
        r = rows[0]
        try:
            if r[-1] != sv.row_check("epochs", r[:-1]) or not isinstance(r[7], bytes):
                raise ValueError("checksum")
            meta = json.loads(r[4])
            return EpochRow(_int(r[0]), _int(r[1]), str(r[2]), str(r[3]),
                            meta if isinstance(meta, dict) else {}, str(r[5]), _int(r[6]),
                            r[7], str(r[8]), str(r[9]), float(r[10]))
        except (ValueError, TypeError):
            self._bad(f"epoch {epoch_id}")
            return None


_EPOCH = f"SELECT {', '.join(sv.COLUMNS['epochs'])}, crc FROM epochs"


def _int(v: object) -> int:
    """An integer column's value (``ValueError`` if it is something else)."""
    if not isinstance(v, int):
        raise ValueError(f"{str(v)[:20]!r} is not an integer")
    return v


def _journal_high(db: sqlite3.Connection) -> int:
    r = db.execute("SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = "
                   "'journal'), 0), coalesce((SELECT max(seq) FROM journal), 0))").fetchone()
    return int(r[0] or 0)


def _upsert(db: sqlite3.Connection, values: dict[str, object]) -> None:
    db.executemany("INSERT OR REPLACE INTO meta(key, value, crc) VALUES (?, ?, ?)",
                   [(k, str(v), sv.row_check("meta", (k, str(v)))) for k, v in values.items()])


def _collect_fabrics(db: sqlite3.Connection) -> None:
    """Drop fabrics that are neither the base in force nor a kept epoch's base."""
    db.execute("DELETE FROM fabrics WHERE hash NOT IN (SELECT base_hash FROM epochs) AND "
               "hash NOT IN (SELECT value FROM meta WHERE key = 'base_hash')")
