import os
import pathlib

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = pathlib.Path(os.environ.get("EQSAT_CORPUS", ROOT.parent / "shared" / "corpus"))
CORPUS_THUNDER = pathlib.Path(os.environ.get("EQSAT_CORPUS_THUNDER",
                                             ROOT.parent / "shared" / "corpus_thunder"))
INDEX_OPS = {"index_select", "gather", "take_along_axis"}


def corpus_files(corpus: pathlib.Path = CORPUS):
    if not corpus.is_dir():
        return []
    return sorted(p for p in corpus.glob("*.py"))


def thunder_files():
    return corpus_files(CORPUS_THUNDER)


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


def require_corpus(corpus: pathlib.Path = CORPUS):
    if not corpus.is_dir():
        pytest.skip(f"the corpus is not at {corpus} (it lies beside the checkout as ../shared/"
                    f"{corpus.name}; EQSAT_CORPUS / EQSAT_CORPUS_THUNDER point elsewhere)")


def indexable_inputs(repro):
    """The repro's inputs; where an index op would read out of range with them, its integer
    inputs as zeros instead. Inputs captured one tensor at a time lose how they relate (T5's
    relative-position buckets: a mask chooses between two index tensors, one of which is in
    range only where the mask picks the other); torch refuses such an index, and nvFuser reads
    out of bounds. Zeros are in range for every index op."""
    import eqsat
    from eqsat.devices import fresh_copies

    if not any(n.op in INDEX_OPS for n in repro.fusion.nodes):
        return repro.inputs
    try:
        eqsat.run_fusion(repro.fusion, fresh_copies(repro.inputs), seed=0)
        return repro.inputs
    except eqsat.FusionError as err:
        if "index out of range" not in str(err):
            raise
    return [torch.zeros_like(x) if isinstance(x, torch.Tensor) and not x.dtype.is_floating_point
            and x.dtype != torch.bool else x for x in repro.inputs]
