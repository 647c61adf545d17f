import os
import pathlib

import pytest

from eqsat.reference.index_inputs import in_range_inputs
from eqsat.rules.rule import RULES, Term, rule

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = pathlib.Path(os.environ.get("EQSAT_CORPUS", ROOT.parent / "shared" / "corpus"))
CORPUS_THUNDER = pathlib.Path(
    os.environ.get("EQSAT_CORPUS_THUNDER", ROOT.parent / "shared" / "corpus_thunder")
)


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
        pytest.skip(
            f"the corpus is not at {corpus} (it lies beside the checkout as ../shared/"
            f"{corpus.name}; EQSAT_CORPUS / EQSAT_CORPUS_THUNDER point elsewhere)"
        )


def indexable_inputs(repro):
    """The repro's inputs, with integer tensors zeroed where an index op would read out of
    range (eqsat.index_inputs)."""
    return in_range_inputs(repro.fusion, repro.inputs)


@pytest.fixture
def exploding_rule():
    """Associativity of +: with commutativity it makes every bracketing of a sum, an e-graph
    that grows exponentially with the number of terms (registered for one test)."""

    @rule("algebra", reassociates=True)
    def add_reassociates_for_test(k, a: Term, b: Term, c: Term):
        """(a+b)+c = a+(b+c)."""
        return k.Add(k.Add(a, b), c), k.Add(a, k.Add(b, c)), []

    yield "add-reassociates-for-test"
    del RULES["add-reassociates-for-test"]
