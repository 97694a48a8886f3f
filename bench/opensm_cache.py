"""The OpenSM cache of the catalogue bench (``bench/real_fabrics.py
--catalogue --opensm-cache DIR``): OpenSM's engines do not change between
runs of the bench, smroute's default does; keeping OpenSM's rows lets a
rerun measure only smroute's engines (:func:`site_compare.run_fabric`)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

from smroute.errors import SmrouteError
from smroute.fabric.export.writers import format_topology
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fileio import atomic_write_text, atomic_writer, read_bytes
from smroute.lab.sidebyside import Simulation

Row = dict[str, Any]
#: The format of a cached engine row: rows of another format (older
#: analysis code, e.g. without the per-stage figures the comparison pairs)
#: are measured again, not misread.
FORMAT = 2


def sim_facts(sim: Simulation) -> Row:
    """What a simulation says of the fabric besides its discovered view."""
    return {"net_source": sim.net_source, "notes": sim.notes, "partition": sim.partition}


def fabric_key(f: Fabric) -> str:
    """The cache key of a fabric: its content hash with its node descriptions
    (they make the host-name order)."""
    h = hashlib.sha256(f.content_hash.encode())
    h.update("\n".join(f.node_desc).encode())
    return h.hexdigest()[:24]


class OpenSMCache:
    """OpenSM's engine rows, one JSON file per (fabric key, engine), and the
    discovered fabric of the last simulation, so that a rerun measures only
    smroute's engines (OpenSM's do not change between runs of the bench).

    An engine row is reused when it is of this :data:`FORMAT` and was
    measured with the same seed and RP samples and, for a time-out, a budget
    at least the one asked (a larger budget runs the engine again).  The
    metrics in a row were computed by the analysis code of its run: bump
    :data:`FORMAT` or empty the folder when that code changes."""

    def __init__(self, folder: Path, *, seed: int, rp_samples: int) -> None:
        self.folder = Path(folder)
        self.seed, self.rp_samples = seed, rp_samples
        self.folder.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str, what: str) -> Path:
        return self.folder / (f"{key}-{what}" + ("" if what.endswith(".gz") else ".json"))

    def _read(self, path: Path) -> Row | None:
        try:
            got = json.loads(read_bytes(path))
        except (OSError, ValueError, SmrouteError):
            return None
        return got if isinstance(got, dict) else None

    def engine(self, key: str, engine: str, budget: float) -> Row | None:
        """The cached row of ``engine`` on fabric ``key``, or ``None``."""
        got = self._read(self._path(key, engine))
        if (got is None or got.get("format") != FORMAT or got.get("seed") != self.seed
                or not isinstance(got.get("row"), dict)
                or got.get("rp_samples") != self.rp_samples):
            return None
        if got["row"].get("status") == "timeout" and float(got.get("budget", 0)) < budget:
            return None
        return dict(got["row"])

    def put_engine(self, key: str, engine: str, budget: float, row: Row) -> None:
        atomic_write_text(self._path(key, engine), json.dumps(
            {"format": FORMAT, "seed": self.seed, "rp_samples": self.rp_samples,
             "budget": budget, "row": row}, indent=1) + "\n")

    def discovered(self, key: str) -> tuple[Fabric, Row] | None:
        """The discovered fabric of ``key`` and its facts (net source, notes,
        partition), or ``None``."""
        got = self._read(self._path(key, "fabric.json.gz"))
        if got is None or not isinstance(got.get("topology"), list):
            return None
        try:
            disc = parse_topology(got["topology"], "ibnetdiscover")
        except SmrouteError:
            return None
        return disc, {k: got.get(k) for k in ("net_source", "notes", "partition")}

    def put_discovered(self, key: str, sim: Simulation) -> None:
        text = json.dumps({**sim_facts(sim), "topology": format_topology(sim.fabric)})
        with atomic_writer(self._path(key, "fabric.json.gz"), "wb") as fh:  # 0.7 MB at 13k CAs
            fh.write(gzip.compress(text.encode(), mtime=0))
