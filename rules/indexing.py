"""Indexing moved through elementwise math and through reductions over other axes.

``Take(V, x, i)`` is ``take_along_axis(x, i)`` along the label ``V`` (``i`` has extent 1
there: one element per row, cross-entropy's target); ``IndexSelect(V, x, i)`` is
``index_select(x, i)`` along ``V`` (a 1-D index along a label of its own). Indexing picks
elements; it computes nothing. So picking after an elementwise op is the op on the picked
elements, bit for bit, and an operand constant along ``V`` (a row statistic: a
log-softmax's logsumexp) is picked unchanged. Pays where the indexed tensor is computed: nvFuser
takes an indexing op only on a kernel's input, so ``take(x - logsumexp_V(x), y)`` writes the
whole [N, V] log-softmax for a kernel that reads N elements of it, where
``take(x, y) - logsumexp_V(x)`` reads N elements of the input x and never forms it.

What the rules assume: indices in range (``0 <= i < |V|``). Out of range, nvFuser reads
memory it was not given (its result is undefined), on both sides alike but not the same
memory; a caller masks them first, as PyTorch's cross-entropy does with ``ignore_index``
(``where(y != ignore_index, y, 0)`` before the take, ``where(y != ignore_index, loss, 0)``
after). A new indexing term the rules make indexes an operand that varies along ``V`` and
along every label of the index (``Take``) or along none of them (``IndexSelect``), as the
encoding's do.

``take-padded`` reads Thunder's way of ignoring a target: ``TakePad(V, a, i)``, a take of a
padded with one zero after the end of ``V`` (the index capped at |V| where it is ignored), is
a where of ``i == |V|`` and a ``Take`` in range, which the rules above then move.

``sum-of-one-hot`` is the backward's side: a one-hot written as ``where(iota_V == y, a, 0)``
(nll_loss's gradient, a scatter of ``a`` into zeros at ``y``) sums over V to ``a`` where y is
in range, so log_softmax_backward's sum over V needs no [N, V] tensor.

Special values: exact (no arithmetic is moved across another: each output element is the
same op on the same operand elements on both sides, so NaN, +-inf, signed zeros and overflow
are the same), except through a sum, whose order of additions may differ between the kernels
the two sides make (marked ``reassociates``).
"""

from eqsat.egraph.terms import TERMS, TermKind

from .rule import Axes, Axis, DType, Index, Term, rule


def _terms(test) -> tuple[str, ...]:
    """The names of the terms whose rows pass ``test``, in the table's order."""
    return tuple(t.name for t in TERMS.values() if test(t))


# the indexing terms moved, and the elementwise ops and reductions they are moved through: the
# rows of the table of terms marked "moved" and "through"
MOVED_INDEXING = _terms(lambda t: "moved" in t.facts)
UNARY_THROUGH = _terms(lambda t: "through" in t.facts and t.kind is TermKind.POINTWISE and t.kids == 1)
BINARY_THROUGH = _terms(lambda t: "through" in t.facts and t.kind is TermKind.POINTWISE and t.kids == 2)
REDUCTIONS_THROUGH = _terms(lambda t: "through" in t.facts and t.kind is TermKind.REDUCTION)
_SNAKE = {"IndexSelect": "index_select", "Take": "take"}
_EXACT_REDUCTION = (
    "exact: a max or min of the same elements, so NaN, +-inf alike and no overflow; signed "
    "zeros not kept (which of +0.0 and -0.0 a max of both gives is the kernel's choice)"
)
_SUM = (
    "the same sum of the same elements, so NaN and +-inf alike, but the two kernels may add them in "
    "another order (reassociates: rounding, and a partial sum's overflow); signed zeros not kept"
)


def _indexes(k, op: str, a, i, V):
    """The conditions under which ``op(V, a, i)`` is an indexing term as the encoding makes
    them: ``a`` varies along ``V``; ``Take``'s index varies only along labels of ``a`` other
    than ``V``; ``IndexSelect``'s along none of ``a``'s."""
    la, li = k.labels(a), k.labels(i)
    index = k.within(li, k.minus(la, V)) if op == "Take" else k.disjoint(li, la)
    return [k.within(V, la), index]


def _register(name: str, fn, doc: str, **flags):
    fn.__name__ = name
    fn.__doc__ = doc
    return rule("indexing", **flags)(fn)


def _unary_rules(op: str, u: str) -> None:
    def fn(k, V: Axis, a: Term, i: Index):
        idx = getattr(k, op)
        return idx(V, getattr(k, u)(a), i), getattr(k, u)(idx(V, a, i)), [k.has_axes(V), k.at_most_one(V)]

    _register(
        f"{_SNAKE[op]}_of_{u.lower()}",
        fn,
        f"""{op}_V({u}(a), i) = {u}({op}_V(a, i)): picking elements commutes with an
    elementwise function (the same function of the same element).

    Special values: exact (NaN, +-inf, signed zeros and overflow: the same op on the same
    element; in range indices only, see the module).""",
        signed_zeros=True,
    )


def _cast_rule(op: str) -> None:
    def fn(k, V: Axis, D: DType, a: Term, i: Index):
        idx = getattr(k, op)
        return idx(V, k.Cast(D, a), i), k.Cast(D, idx(V, a, i)), [k.has_axes(V), k.at_most_one(V)]

    _register(
        f"{_SNAKE[op]}_of_cast",
        fn,
        f"""{op}_V(cast(a), i) = cast({op}_V(a, i)): a cast is elementwise. Pays where a is
    an input: bf16 logits upcast to Float are picked from the bf16 input (nvFuser indexes only
    a kernel's input, and copies the upcast into each kernel that reads it: the Float logits
    are never written).

    Special values: exact (the same rounding of the same element: NaN, +-inf, signed zeros
    and overflow alike).""",
        signed_zeros=True,
    )


def _binary_rules(op: str, b_: str) -> None:
    def both(k, V: Axis, a: Term, b: Term, i: Index):
        idx, f = getattr(k, op), getattr(k, b_)
        return (
            idx(V, f(a, b), i),
            f(idx(V, a, i), idx(V, b, i)),
            [k.has_axes(V), k.at_most_one(V), *_indexes(k, op, a, i, V), *_indexes(k, op, b, i, V)],
        )

    def left(k, V: Axis, a: Term, b: Term, i: Index):
        idx, f = getattr(k, op), getattr(k, b_)
        return (
            idx(V, f(a, b), i),
            f(idx(V, a, i), b),
            [k.has_axes(V), k.at_most_one(V), k.constant_along(b, V), *_indexes(k, op, a, i, V)],
        )

    def right(k, V: Axis, a: Term, b: Term, i: Index):
        idx, f = getattr(k, op), getattr(k, b_)
        return (
            idx(V, f(a, b), i),
            f(a, idx(V, b, i)),
            [k.has_axes(V), k.at_most_one(V), k.constant_along(a, V), *_indexes(k, op, b, i, V)],
        )

    name = f"{_SNAKE[op]}_of_{b_.lower()}"
    special = """

    Special values: exact: the same op on the same elements, so NaN, +-inf and overflow alike;
    signed zeros too, but for a max or min of +0.0 and -0.0, whose sign is the kernel's choice."""
    signed_zeros = b_ not in ("Maximum", "Minimum")
    _register(
        name,
        both,
        f"""{op}_V({b_}(a, b), i) = {b_}({op}_V(a, i), {op}_V(b, i)) where both vary
    along V: the same op on the picked elements of each."""
        + special,
        signed_zeros=signed_zeros,
    )
    _register(
        name + "_with_constant",
        left,
        f"""{op}_V({b_}(a, b), i) = {b_}({op}_V(a, i), b) where
    b lacks V (a row statistic: every element of a row meets the same b, so the picked one
    does): the indexed tensor is never formed. take(x - logsumexp_V(x), y) = take(x, y) -
    logsumexp_V(x): cross-entropy's log-softmax."""
        + special,
        signed_zeros=signed_zeros,
    )
    _register(
        name + "_of_constant",
        right,
        f"""{op}_V({b_}(a, b), i) = {b_}(a, {op}_V(b, i)) where
    a lacks V (the mirror image)."""
        + special,
        signed_zeros=signed_zeros,
    )


def _reduction_rule(op: str, r: str) -> None:
    def fn(k, V: Axis, R: Axes, a: Term, i: Index):
        idx, red = getattr(k, op), getattr(k, r)
        return (
            idx(V, red(R, a), i),
            red(R, idx(V, a, i)),
            [
                k.has_axes(V),
                k.at_most_one(V),
                k.disjoint(V, R),
                k.constant_along(i, R),
                *_indexes(k, op, a, i, V),
            ],
        )

    exact = r != "Sum"
    _register(
        f"{_SNAKE[op]}_of_{r.lower()}",
        fn,
        f"""{op}_V({r}_R(a), i) = {r}_R({op}_V(a, i)) when R
    does not hold V and the index is constant along R: each picked element of the reduction
    reduces the same elements of a (those of its row along R), so only the picked rows are
    reduced.

    Special values: {_EXACT_REDUCTION if exact else _SUM}.""",
        reassociates=not exact,
    )


@rule("indexing")
def sum_of_one_hot(k, V: Axis, a: Term, y: Index):
    """Sum_V(where(iota_V == y, a, 0)) = where(0 <= y < |V|, a, 0) when a and y lack V: the
    one-hot row holds a at y alone (nowhere where y is out of range, ignore_index = -100), so
    its sum is a. A scatter of a one-hot into zeros (nll_loss's backward) is written so. Pays
    in cross-entropy's backward: log_softmax_backward's sum_V of the nll gradient needs no
    [N, V] tensor, so nothing of that size crosses kernels.

    Special values: NaN and +-inf in a are kept where y is in range and are not read where it
    is not (a where, not a product), on both sides; no overflow (a + zeros is a). Signed zero:
    a = -0.0 sums to +0.0 on the left (the sum starts at +0.0), stays -0.0 on the right, so
    zeros' signs are not kept. Floating a only (an integer sum is Int64)."""
    one_hot = k.Tern("where", k.Bin("eq", k.Iota(V), y), a, k.Num(0.0))
    in_range = k.Bin("logical_and", k.Bin("ge", y, k.Int(0)), k.Bin("lt", y, k.Extent(V)))
    return (
        k.Sum(V, one_hot),
        k.Tern("where", in_range, a, k.Num(0.0)),
        [k.constant_along(a, V), k.constant_along(y, V), k.floating(a)],
    )


@rule("indexing", signed_zeros=True)
def take_padded(k, V: Axis, D: DType, a: Term, i: Index):
    """TakePad_V(a, i) = cast(where(i == |V|, 0.0, Take_V(a, where(i == |V|, 0, i))), dtype(a)):
    the padded zero where the index is the pad's place, else a's element, picked with an
    index in range (0 in place of |V|: the take never reads past a's end); the cast gives the
    where a's dtype back (a where of a bf16 value and a Double scalar is Float: exact, and
    back to bf16 exact too; to a's own dtype it is no op). Thunder's nll_loss, for an
    ignore_index outside [0, V), caps the target at V and takes from the negated log-softmax
    padded with one zero column; so written, the take is a Take, which the rules above move
    onto the logits, and the [N, V+1] padded log-softmax is never formed.

    Assumes indices in [0, |V|] (the pad's extent: the cap makes them so) and |V| >= 1 (a
    static extent: at |V| = 0 the right side's take would read an empty axis). Floating a
    only (TakePad is encoded from pads of floating values alone).

    Special values: exact: a's element where the index is in range, +0.0 at |V|, on both
    sides (NaN, +-inf and signed zeros alike; no overflow: nothing is computed, and the cast
    back to a's dtype is of a value of that dtype)."""
    last = k.Bin("eq", i, k.Extent(V))
    picked = k.Tern("where", last, k.Num(0.0), k.Take(V, a, k.Tern("where", last, k.Int(0), i)))
    return (
        k.TakePad(V, a, i),
        k.Cast(D, picked),
        [
            k.has_axes(V),
            k.at_most_one(V),
            k.never_empty(V),
            k.floating(a),
            k.has_dtype(a, D),
            *_indexes(k, "Take", a, i, V),
        ],
    )


for _op in MOVED_INDEXING:
    for _u in UNARY_THROUGH:
        _unary_rules(_op, _u)
    _cast_rule(_op)
    for _b in BINARY_THROUGH:
        _binary_rules(_op, _b)
    for _r in REDUCTIONS_THROUGH:
        _reduction_rule(_op, _r)
