import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = pathlib.Path(os.environ.get("EQSAT_CORPUS", ROOT.parent / "shared" / "corpus"))


def corpus_files():
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.glob("*.py"))


def corpus_meta_files() -> set[str]:
    """Files whose INDEX.md row marks them `meta` (inputs over 256 MiB)."""
    index = CORPUS / "INDEX.md"
    if not index.exists():
        return set()
    out = set()
    for line in index.read_text().splitlines():
        if line.startswith("| [") and "| " in line:
            name = line.split("]", 1)[0][3:]
            notes = line.rstrip("|").rsplit("|", 1)[-1]
            if "meta" in notes.split(";") or " meta" in notes:
                out.add(name)
    return out


def require_corpus():
    if not CORPUS.is_dir():
        pytest.skip(f"the corpus is not at {CORPUS} (it lies beside the checkout as ../shared/corpus)")
