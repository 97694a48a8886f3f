"""What guards the state database (:mod:`smroute.service.state.store`) against
damage: row checksums, the epoch high-water mark kept beside the database,
and the salvage of intact rows from a damaged file (pure checks and plain
file I/O; no routing).

Row checksums: every stored row carries ``crc``, a 64-bit BLAKE2b digest of
its table name and its values (each tagged with its type, so a text ``'7'``
in place of the integer ``7`` fails too), checked on every read.

High-water mark: ``<database>.hwm`` and ``.hwm2``, written in turn (in
place: one cut short leaves the other whole), each one line of JSON with
its own checksum: at every commit and fabric load (fsynced by the state
writer thread right after, :func:`sync_high_water`) the highest epoch id
committed, the base fabric's hash, the down set in force (itself up to
:data:`MARK_DOWN_BYTES` of JSON, its digest always) and the journal
position it includes; at every journaled batch (not fsynced: the journal
itself is durable in the database) the last journal position given and a
copy of the events journaled since.  A damaged or lost database cannot make
epoch ids go back, and what a rebuilt down set should be is known.

Salvage: rows read table by table from a damaged file (from the front until
the first damaged page, then from the back), each kept only if its checksum
holds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "COLUMNS",
    "bad_rows",
    "HighWater",
    "MARK_DOWN_BYTES",
    "MARK_PENDING",
    "MAX_EPOCH_ID",
    "Salvaged",
    "down_digest",
    "mark_paths",
    "fill_checks",
    "read_high_water",
    "restore",
    "row_check",
    "salvage",
    "sync_high_water",
    "text",
    "write_high_water",
]

#: The columns of each table (the checksum ``crc`` follows them).
COLUMNS: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "fabrics": ("hash", "source", "source_sha256", "data", "stored_at"),
    "epochs": ("id", "parent_id", "instance", "base_hash", "meta", "down", "journal_seq",
               "tables", "tables_sha256", "validation", "committed_at"),
    "journal": ("seq", "base_hash", "kind", "guid", "port", "received_at"),
}
#: Epoch ids above this are damage (the wire's uint64 and SQLite's int64 both hold it).
MAX_EPOCH_ID = 2**62
#: A down set whose JSON is longer is kept in the high-water mark by its digest only.
MARK_DOWN_BYTES = 64 << 10
#: Journaled events kept in the high-water mark at most.
MARK_PENDING = 1000


def text(raw: bytes) -> str:
    """SQLite text as ``str`` even if it is not UTF-8 (such text then fails
    its row's checksum instead of failing the read)."""
    return raw.decode("utf-8", "surrogateescape")


def row_check(table: str, values: Sequence[object]) -> str:
    """The checksum of one row of ``table`` (16 hex digits)."""
    h = hashlib.blake2b(table.encode(), digest_size=8)
    for v in values:
        if isinstance(v, bytes | bytearray | memoryview):
            b, tag = bytes(v), b"b"
        elif isinstance(v, bool | int):
            b, tag = str(int(v)).encode(), b"i"
        elif isinstance(v, float):
            b, tag = repr(v).encode(), b"f"
        elif v is None:
            b, tag = b"", b"n"
        else:
            b, tag = str(v).encode("utf-8", "surrogatepass"), b"s"
        h.update(tag + len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


def down_digest(down_json: str) -> str:
    """The digest of a down set's JSON (``state_codec.down_to_json``, sorted:
    one text per down set)."""
    return hashlib.sha256(down_json.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class HighWater:
    """The last commit (or fabric load) as recorded beside the database;
    ``down``: the down set's JSON (``""`` if it was too long to keep);
    ``journal_high``: the last journal position given since, ``pending``
    the events journaled since (position, kind, GUID, port; the first
    :data:`MARK_PENDING` of them)."""

    epoch_id: int
    base_hash: str
    down_sha: str
    journal_seq: int
    down: str = ""
    journal_high: int = 0
    pending: tuple[tuple[int, str, int, int], ...] = ()
    #: how many marks were written before (which of the two files it goes to)
    n: int = 0


def mark_paths(db: Path) -> tuple[Path, Path]:
    """The two files of the high-water mark beside ``db`` (written in turn)."""
    return db.with_name(db.name + ".hwm"), db.with_name(db.name + ".hwm2")


def write_high_water(db: Path, hw: HighWater, sync: bool = True) -> None:
    """Write ``hw`` over the older of the two mark files (``hw.n`` even: the
    first; in place, no rename: a write cut short leaves the other file
    whole); ``sync``: on disk when this returns.  ``OSError`` if it cannot be."""
    body = {"n": hw.n, "epoch_id": hw.epoch_id, "base_hash": hw.base_hash,
            "down_sha": hw.down_sha, "journal_seq": hw.journal_seq,
            "journal_high": hw.journal_high,
            "pending": [list(p) for p in hw.pending[:MARK_PENDING]],
            "down": hw.down if len(hw.down) <= MARK_DOWN_BYTES else ""}
    body["check"] = row_check("hwm", [json.dumps(body, sort_keys=True)])
    data = (json.dumps(body, sort_keys=True) + "\n").encode()
    fd = os.open(mark_paths(db)[hw.n % 2], os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def sync_high_water(db: Path) -> None:
    """Wait until the mark files and their directory entries are on disk."""
    for path in (*mark_paths(db), db.parent):
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _read_mark(path: Path) -> HighWater | None:
    """One mark file (``ValueError`` if it is damaged; ``None`` if absent)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return None
    try:
        body = json.loads(text)
        check = body.pop("check")
        if check != row_check("hwm", [json.dumps(body, sort_keys=True)]):
            raise ValueError("checksum mismatch")
        hw = HighWater(int(body["epoch_id"]), str(body["base_hash"]), str(body["down_sha"]),
                       int(body["journal_seq"]), str(body.get("down", "")),
                       int(body.get("journal_high", 0)),
                       tuple((int(s), str(k), int(g), int(p))
                             for s, k, g, p in body.get("pending", [])), int(body["n"]))
    except (TypeError, KeyError, AttributeError) as err:
        raise ValueError(str(err)) from None
    if not 0 <= hw.epoch_id <= MAX_EPOCH_ID or hw.journal_seq < 0:
        raise ValueError(f"epoch id {hw.epoch_id} out of range")
    return hw


def read_high_water(db: Path) -> tuple[HighWater | None, str]:
    """The newest whole mark beside ``db`` and ``""``; or ``None`` and why
    not (``""`` if there is none: a database that never committed, or an
    older daemon's).  One damaged file beside a whole one is a write cut
    short (the whole one is one write older): not a problem."""
    marks, why = [], []
    for path in mark_paths(db):
        try:
            hw = _read_mark(path)
        except OSError as err:
            why.append(f"{path}: {err.strerror or err}")
            continue
        except ValueError as err:
            why.append(f"{path} is damaged ({err})")
            continue
        if hw is not None:
            marks.append(hw)
    if marks:
        return max(marks, key=lambda h: h.n), ""
    return None, "; ".join(why)


@dataclass
class Salvaged:
    """Rows read back from a damaged database whose checksums hold, by table;
    rows dropped; the journal's last position ever given (0 if unknown)."""

    rows: dict[str, list[tuple[object, ...]]]
    dropped: int
    journal_high: int


def _read_table(db: sqlite3.Connection, table: str, cols: tuple[str, ...]
                ) -> dict[int, tuple[object, ...]]:
    got: dict[int, tuple[object, ...]] = {}
    sql = f"SELECT rowid, {', '.join(cols)}, crc FROM {table} ORDER BY rowid"
    for order in ("", " DESC"):
        with contextlib.suppress(sqlite3.Error, ValueError, OverflowError):
            for r in db.execute(sql + order):
                if r[0] in got:
                    break
                got[r[0]] = tuple(r[1:])
    return got


def salvage(path: Path) -> Salvaged:
    """Every row of the state database at ``path`` that can still be read and
    whose checksum holds (nothing if the file is no database of this schema)."""
    out = Salvaged({t: [] for t in COLUMNS}, 0, 0)
    try:
        db = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error:
        return out
    db.text_factory = text
    try:
        for table, cols in COLUMNS.items():
            for row in _read_table(db, table, cols).values():
                if row[-1] == row_check(table, row[:-1]):
                    out.rows[table].append(row)
                else:
                    out.dropped += 1
        with contextlib.suppress(sqlite3.Error, TypeError, ValueError):
            r = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'journal'").fetchone()
            out.journal_high = int(r[0]) if r else 0
    finally:
        db.close()
    return out


def restore(db: sqlite3.Connection, saved: Salvaged) -> None:
    """Insert ``saved`` into a new database (inside the caller's transaction)."""
    for table, rows in saved.rows.items():
        marks = ", ".join("?" * (len(COLUMNS[table]) + 1))
        db.executemany(f"INSERT OR REPLACE INTO {table}({', '.join(COLUMNS[table])}, crc) "
                       f"VALUES ({marks})", rows)
    if saved.journal_high:
        high = db.execute("SELECT max(?, coalesce(max(seq), 0)) FROM journal",
                          (saved.journal_high,)).fetchone()[0]
        db.execute("DELETE FROM sqlite_sequence WHERE name = 'journal'")
        db.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('journal', ?)", (high,))


def fill_checks(db: sqlite3.Connection) -> None:
    """Give every row its checksum (migrating from a schema without them)."""
    for table, cols in COLUMNS.items():
        rows = db.execute(f"SELECT rowid, {', '.join(cols)} FROM {table}").fetchall()
        db.executemany(f"UPDATE {table} SET crc = ? WHERE rowid = ?",
                       [(row_check(table, r[1:]), r[0]) for r in rows])


def bad_rows(db: sqlite3.Connection, limit: int = 3) -> tuple[int, list[str]]:
    """How many rows of an open database fail their checksum, and the first
    ``limit`` of them named."""
    n, named = 0, list[str]()
    for table, cols in COLUMNS.items():
        for r in db.execute(f"SELECT {', '.join(cols)}, crc FROM {table}"):
            if r[-1] != row_check(table, r[:-1]):
                n += 1
                if len(named) < limit:
                    named.append(f"{table} {str(r[0])[:40]!r}")
    return n, named
