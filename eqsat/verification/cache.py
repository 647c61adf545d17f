"""The on-disk cache of GPU verification: one JSON file per decision, so each fusion is timed
once per GPU, nvFuser and eqsat.

The key is the definition (a hash of its printed source), the inputs' shapes, dtypes and
strides, the GPU's name and the versions the runner reports (nvFuser's, torch's), and eqsat's
version; the file is named by the key's hash. The entry records the candidates it decided
between (hashes of their sources): an entry about other candidates is not used (and is
overwritten). Files are written atomically (a temporary file, then ``os.replace``). A damaged
file (not JSON, another schema, a key other than its name says) is ignored with a warning
naming it, and overwritten: nothing read from one is trusted.

The folder is ``cache_dir`` where given, else ``$EQSAT_CACHE_DIR``, else ``~/.cache/eqsat``;
the entries lie in its ``verify/`` folder.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

import torch

SCHEMA = "eqsat-gpu-verification/1"
ENV = "EQSAT_CACHE_DIR"


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir``, else ``$EQSAT_CACHE_DIR``, else ``~/.cache/eqsat``."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get(ENV)
    return Path(env) if env else Path.home() / ".cache" / "eqsat"


def eqsat_version() -> str:
    try:
        return metadata.version("eqsat")
    except metadata.PackageNotFoundError:
        return "unknown"


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def input_signature(inputs: Sequence[Any]) -> list:
    """Per input: [shape, dtype, strides] of a tensor, ["scalar", its type] of anything else."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            out.append([list(x.shape), str(x.dtype).removeprefix("torch."), list(x.stride())])
        else:
            out.append(["scalar", type(x).__name__])
    return out


def cache_key(source: str, inputs: Sequence[Any], device: str, versions: dict[str, str]) -> dict:
    """The key of a decision: the definition's printed ``source``, the inputs' signature, the
    GPU's name, the runner's ``versions`` and eqsat's."""
    return {
        "definition": source_hash(source),
        "inputs": input_signature(inputs),
        "device": device,
        "versions": {**{k: str(v) for k, v in versions.items()}, "eqsat": eqsat_version()},
    }


@dataclass(frozen=True)
class Record:
    """What was measured of one fusion: its steady-state time (None where it was not timed)
    and why it was rejected (None: it was not)."""

    measured_us: float | None
    problem: str | None


@dataclass(frozen=True)
class Entry:
    """A cached decision: the candidates' source hashes, the records of the input and each
    candidate (the input first), the index of the candidate kept (-1: the input), and the
    seconds the verification took."""

    candidates: tuple[str, ...]
    records: tuple[Record, ...]
    kept: int
    seconds: float


class VerificationCache:
    """The files of one cache folder (see the module's docstring)."""

    def __init__(self, cache_dir: str | os.PathLike | None = None):
        self.folder = cache_root(cache_dir) / "verify"

    def path(self, key: dict) -> Path:
        return self.folder / f"{source_hash(json.dumps(key, sort_keys=True))}.json"

    def load(self, key: dict, candidates: Sequence[str]) -> Entry | None:
        """The entry of ``key`` deciding between these ``candidates`` (source hashes), or None:
        none, one about other candidates, or a damaged one (with a warning)."""
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as err:
            return self._damaged(path, f"unreadable ({err})")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            return self._damaged(path, f"not JSON ({err})")
        try:
            entry = _parse(data, key)
        except (KeyError, TypeError, ValueError) as err:
            return self._damaged(path, str(err) or type(err).__name__)
        return entry if entry.candidates == tuple(candidates) else None

    def store(self, key: dict, entry: Entry) -> Path:
        """Writes the entry atomically; returns its path."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "schema": SCHEMA,
            "key": key,
            "candidates": list(entry.candidates),
            "records": [{"measured_us": r.measured_us, "problem": r.problem} for r in entry.records],
            "kept": entry.kept,
            "seconds": round(entry.seconds, 3),
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @staticmethod
    def _damaged(path: Path, why: str) -> None:
        warnings.warn(
            f"eqsat: ignoring the damaged GPU verification cache file {path}: {why}; it will be overwritten",
            stacklevel=3,
        )
        return None


def _parse(data: Any, key: dict) -> Entry:
    """The entry in ``data``; raises ValueError, KeyError or TypeError saying what is wrong."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"not of schema {SCHEMA!r}")
    if data["key"] != key:
        raise ValueError("its key is not the one its name stands for")
    candidates = data["candidates"]
    if not isinstance(candidates, list) or not all(isinstance(c, str) for c in candidates):
        raise TypeError("candidates must be a list of source hashes")
    records = []
    for r in data["records"]:
        measured, problem = r["measured_us"], r["problem"]
        if measured is not None and not (
            isinstance(measured, (int, float)) and not isinstance(measured, bool) and 0 < measured < math.inf
        ):
            raise ValueError(f"a measured time must be a positive number or null, got {measured!r}")
        if problem is not None and not isinstance(problem, str):
            raise TypeError("a problem must be text or null")
        records.append(Record(None if measured is None else float(measured), problem))
    if len(records) != len(candidates) + 1:
        raise ValueError(f"{len(records)} records for the input and {len(candidates)} candidates")
    kept = data["kept"]
    if not isinstance(kept, int) or isinstance(kept, bool) or not -1 <= kept < len(candidates):
        raise ValueError(f"kept must be -1 (the input) or a candidate's index, got {kept!r}")
    chosen = records[kept + 1]
    if chosen.measured_us is None or chosen.problem is not None:
        raise ValueError("the fusion kept was not measured, or was rejected")
    seconds = data["seconds"]
    if not isinstance(seconds, (int, float)) or not 0 <= seconds < math.inf:
        raise ValueError(f"seconds must be a number >= 0, got {seconds!r}")
    return Entry(tuple(candidates), tuple(records), kept, float(seconds))
