"""Tensor layouts as nvFuser declares them: ``stride_order`` and ``contiguity``.

The conventions, written here once (nvFuser's ``define_tensor`` and ``add_output``):

- ``stride_order[j]`` is dim j's rank by stride, 0 the innermost (smallest stride): for rank 2,
  ``[1, 0]`` is row-major and ``[0, 1]`` column-major. None or empty: row-major.
- The *allocation order* lists the dims outermost first (by decreasing ``stride_order``): dim j
  sits at place ``rank - 1 - stride_order[j]``.
- ``contiguity`` has one entry per allocation place, outermost first. True: the dim has the
  dense stride (the stride times the extent of the next inner dim that has one, 1 for the
  innermost); False: any stride; None: a broadcast (extent 1, or an expanded dim of stride 0),
  which carries no stride and is skipped when the dense stride is carried inward-out.

Tensors are taken duck-typed (``dim``, ``permute``, ``contiguous``), so the IR needs no torch here.
"""

from __future__ import annotations

import math

from typing import Any, Callable, Iterator, Sequence


def permutation_problem(stride_order: Sequence[int], rank: int) -> str | None:
    """Why ``stride_order`` is no stride order of ``rank`` dims (None when it is one)."""
    if sorted(stride_order) != list(range(rank)):
        return f"stride_order {list(stride_order)} is not a permutation of {rank} dims"
    return None


def allocation_order(stride_order: Sequence[int] | None, rank: int) -> list[int]:
    """The dims outermost first: by decreasing ``stride_order``; row-major where it is None or
    empty."""
    if not stride_order:
        return list(range(rank))
    return sorted(range(rank), key=lambda j: -stride_order[j])


def memory_order(strides: Sequence[int]) -> list[int]:
    """The dims outermost first as ``strides`` lay them out: by decreasing stride, and of equal
    strides (extent-1 or broadcast dims) the later dim first."""
    return sorted(range(len(strides)), key=lambda j: (-strides[j], -j))


def stride_order_of(order: Sequence[int]) -> tuple[int, ...]:
    """The stride order whose allocation order is ``order`` (dims outermost first)."""
    rank = len(order)
    out = [0] * rank
    for place, j in enumerate(order):
        out[j] = rank - 1 - place
    return tuple(out)


def dim_contiguity(
    contiguity: Sequence[Any] | None, stride_order: Sequence[int] | None, rank: int
) -> list[Any]:
    """``contiguity`` (per allocation place) per dim, in dim order; True where it has no entry."""
    place = {j: p for p, j in enumerate(allocation_order(stride_order, rank))}
    return [
        contiguity[place[j]] if contiguity is not None and place[j] < len(contiguity) else True
        for j in range(rank)
    ]


def default_contiguity(
    shape: Sequence[int], stride_order: Sequence[int] | None, contiguous: bool = True
) -> tuple[Any, ...]:
    """The contiguity that ``contiguity=None`` (or one bool for all dims) declares: ``contiguous``
    for each allocation place, None (a broadcast) for extent-1 dims."""
    return tuple(None if shape[j] == 1 else contiguous for j in allocation_order(stride_order, len(shape)))


def dense_strides(sizes: Sequence[int], stride_order: Sequence[int] | None = None) -> list[int]:
    """The strides of a dense tensor of ``sizes`` allocated in ``stride_order`` (row-major where
    None); an extent-0 dim counts as 1, as torch counts it."""
    strides = [0] * len(sizes)
    acc = 1
    for j in reversed(allocation_order(stride_order, len(sizes))):
        strides[j] = acc
        acc *= max(sizes[j], 1)
    return strides


def _inward_out(
    sizes: Sequence[int], strides: Sequence[int], order: Sequence[int], skip: Callable[[int, int], bool]
) -> Iterator[tuple[int, int, int]]:
    """(place, dim, dense stride) for each allocation place of ``order`` not ``skip(place, dim)``,
    innermost first: the dense stride is 1 for the first, then the previous dim's stride times
    its extent."""
    expected = 1
    for place in reversed(range(len(order))):
        j = order[place]
        if skip(place, j):
            continue
        yield place, j, expected
        expected = strides[j] * sizes[j]


def layout_of(sizes: Sequence[int], strides: Sequence[int]) -> tuple[tuple[Any, ...], tuple[int, ...] | None]:
    """(contiguity, stride_order) that declare a tensor of ``sizes`` and ``strides`` (nvFuser's
    ``from_pytorch``): extent-1 and stride-0 dims are broadcasts (None); the stride order is
    None where it is row-major."""
    order = memory_order(strides)
    contiguity: list[Any] = [None] * len(sizes)
    broadcast = lambda place, j: sizes[j] == 1 or strides[j] == 0  # noqa: E731
    for place, j, expected in _inward_out(sizes, strides, order, broadcast):
        contiguity[place] = strides[j] == expected
    stride_order = stride_order_of(order)
    row_major = stride_order == tuple(range(len(sizes) - 1, -1, -1))
    return tuple(contiguity), None if row_major else stride_order


def stride_problem(
    sizes: Sequence[int],
    strides: Sequence[int],
    contiguity: Sequence[Any] | bool | None,
    stride_order: Sequence[int] | None,
) -> str | None:
    """Why ``strides`` break the declared ``contiguity`` and ``stride_order`` (None when they do
    not): a dim declared contiguous must have the dense stride. Extent-1 and broadcast (None)
    dims carry no stride requirement; an empty tensor, a contiguity of another rank or none at
    all, none. One bool stands for every dim."""
    rank = len(sizes)
    if contiguity is None or rank == 0 or 0 in sizes:
        return None
    if isinstance(contiguity, bool):
        contiguity = [contiguity] * rank
    if len(contiguity) != rank:
        return None
    skip = lambda place, j: sizes[j] == 1 or contiguity[place] is None  # noqa: E731
    for place, j, expected in _inward_out(sizes, strides, allocation_order(stride_order, rank), skip):
        if contiguity[place] and strides[j] != expected:
            return (
                f"dim {j} is declared contiguous, which needs stride {expected}, but has "
                f"stride {strides[j]} (strides {list(strides)}); pass a .contiguous() tensor, "
                f"or declare that dim contiguity=False"
            )
    return None


def with_stride_order(t: Any, stride_order: Sequence[int]) -> Any:
    """A dense copy of tensor ``t``'s values allocated in ``stride_order`` (``t`` itself where it
    is laid out so already): how an output written with a stride order is permuted."""
    order = allocation_order(stride_order, t.dim())
    inverse = [order.index(j) for j in range(t.dim())]
    return t.permute(order).contiguous().permute(inverse)


def lays_out_as_is(producer: dict, node: Any) -> bool:
    """Whether ``stride_order`` node ``node`` asks for the layout its input already has (see
    :func:`view_order`). nvFuser then aliases the result (no copy); otherwise the stride order
    copies. ``producer``: value id -> the node that makes it (``Fusion.producer``)."""
    have = view_order(producer, node.arg("arg"))
    return have is not None and have == _asked(node, len(have))


def view_order(producer: dict, value: Any) -> list[int] | None:
    """The allocation order of ``value`` where it is a fusion input, or a chain of permutes,
    stride orders and row-major reshapes from one (None: not known, or not such a chain).
    Walked without recursion: a chain may be thousands of views long."""
    chain, p = [], producer.get(value.id)
    while p is not None and p.op in _ORDER_VIEWS:
        chain.append(p)
        p = producer.get(p.arg("arg").id)
    if p is None or p.op != "define_tensor":
        return None
    have = allocation_order(p.arg("stride_order"), len(p.arg("shape")))
    for p in reversed(chain):
        have = _order_after(p, have)
        if have is None:
            return None
    return have


# the views through which an input's allocation order is followed (view_order)
_ORDER_VIEWS = ("permute", "stride_order", "reshape")


def _order_after(p: Any, have: list[int]) -> list[int] | None:
    """The allocation order of view ``p``'s result, its input's being ``have``."""
    if p.op == "permute":  # new dim i is the input's dim dims[i]
        dims = list(p.arg("dims"))
        return [dims.index(d) for d in have]
    if p.op == "stride_order":
        return _asked(p, len(have))
    if have != list(range(len(have))):  # a reshape keeps a row-major layout row-major
        return None
    new_shape = p.arg("new_shape")
    rank = len(new_shape) if isinstance(new_shape, (list, tuple)) else None
    return None if rank is None else list(range(rank))


def merges_apart(order: Sequence[int], old: Sequence[int | None], new: Sequence[int | None]) -> bool:
    """Whether a reshape of a tensor of extents ``old``, laid out in ``order`` (its dims
    outermost first), to extents ``new`` merges dims that do not lie next to each other, outer
    before inner, in memory: then no strides view the result, and nvFuser writes it (a
    pointwise kernel: a permuted input reshaped as an output). Extent-1 dims lie anywhere.
    False where an extent is not known, or where the reshape splits a dim (read as a view)."""
    if any(e is None for e in (*old, *new)) or math.prod(old) != math.prod(new):
        return False
    place = {d: i for i, d in enumerate(d for d in order if old[d] != 1)}
    i = 0
    for extent in new:
        if extent == 1:
            continue
        run, size = [], 1
        while size < extent and i < len(old):
            size *= old[i]
            run.append(i)
            i += 1
        if size != extent:
            return False  # a split: a view of one dim (or not a grouping this reads)
        places = [place[d] for d in run if old[d] != 1]
        if any(b != a + 1 for a, b in zip(places, places[1:])):
            return True
    return False


def copying_reshapes(fusion: Any, extents: dict | None = None) -> set[int]:
    """The reshapes of ``fusion`` that copy (their results' value ids): a reshape of a fusion
    input laid out otherwise than row-major (through permutes and stride orders,
    :func:`view_order`) that merges dims not next to each other in memory
    (:func:`merges_apart`), where only views and outputs read the result. No strides view it,
    so nvFuser writes it, in a pointwise kernel of its own. ``extents``: label -> extent beyond
    the fusion's static ones (the inputs' sizes). Llama's rotary backward, as Thunder writes
    it, flattens k's permuted input gradient [b, s, kv heads, d] to [b, s, kv heads * d] as an
    output: one kernel of its 3, and of the 7 of the rotary backward before it (H100, session
    45's ``thunder_llama_20`` and ``thunder_llama_15``). Where an op reads it (Phi-3's pad of
    it into the stacked q, k, v gradient), that op's kernel reads the input through the
    reshape (``thunder_phi3_18``: one kernel). One pass over the nodes each way."""
    orders: dict[int, list[int]] = {}
    for node in fusion.nodes:
        if node.opaque:
            continue
        if node.op == "define_tensor":
            orders[node.outputs[0]] = allocation_order(node.arg("stride_order"), len(node.arg("shape")))
        elif node.op in _ORDER_VIEWS and node.arg("arg").id in orders:
            have = _order_after(node, orders[node.arg("arg").id])
            if have is not None:
                orders[node.outputs[0]] = have
    views_only: dict[int, bool] = {}  # value -> read by views alone, and their results likewise
    for node in reversed(fusion.nodes):
        for v in node.outputs:
            views_only[v] = all(
                r.op in VIEW_OPS and not r.opaque and all(views_only.get(o, False) for o in r.outputs)
                for r in fusion.readers.get(v, ())
            )
    types = fusion.types
    known = {**{k: v for k, v in types.extents.items() if v is not None}, **(extents or {})}

    def extent(d):
        return 1 if d.broadcast and known.get(d.label) == 1 else known.get(d.label)

    out = set()
    for node in fusion.nodes:
        if node.op != "reshape" or node.opaque or not views_only.get(node.outputs[0]):
            continue
        order = orders.get(node.arg("arg").id)
        if order is None or order == sorted(order):
            continue
        old, new = types.of.get(node.arg("arg").id), types.of.get(node.outputs[0])
        if getattr(old, "dims", None) is None or getattr(new, "dims", None) is None:
            continue
        if merges_apart(order, [extent(d) for d in old.dims], [extent(d) for d in new.dims]):
            out.add(node.outputs[0])
    return out


def _asked(node: Any, rank: int) -> list[int]:
    """The allocation order a ``stride_order`` node asks for (row-major where it is empty)."""
    return allocation_order(node.arg("stride_order"), rank)


# ops nvFuser's alias analysis makes views of their input (AliasFinder: reshape, permute/set,
# slice, broadcast, squeeze, expand); a stride order only where it keeps its input's layout
VIEW_OPS = frozenset({"reshape", "permute", "slice", "broadcast", "broadcast_in_dim", "squeeze", "expand"})


def alias_output_sources(fusion: Any, copies: set[int] | None = None) -> set[int]:
    """The values that fusion outputs view: for each output made by a chain of view ops, the
    value the chain starts from (an input, or the first value computed). nvFuser's
    MarkAliasesPreparePass puts a ``segment_set`` after each such value, and its expression
    evaluator runs the views behind it as a segment of their own, on the host: no kernel, a
    segment's host cost. (Outputs written into an input, ``alias_input``, are not views.) A
    cast to the dtype its input has is one of those views: nvFuser's ``castOp`` makes it a
    ``set`` (csrc/ops/arith.cpp). A reshape that copies (``copies``, the encoding's
    :func:`copying_reshapes`; found here at the static extents where not given) is none:
    a kernel writes it."""
    producer = fusion.producer
    copies = copying_reshapes(fusion) if copies is None else copies
    is_view = lambda node: (
        (_is_view(producer, node) and node.outputs[0] not in copies) or _is_set(fusion, node)
    )
    sources = set()
    for out in fusion.outputs:
        if out.alias_input is not None:
            continue
        value, node = out.value, producer.get(out.value)
        if not is_view(node):  # computed, or an input: nothing viewed
            continue
        while is_view(node):
            value = node.arg("arg").id
            node = producer.get(value)
        sources.add(value)
    return sources


def _is_view(producer: dict, node: Any) -> bool:
    if node is None or node.opaque:
        return False
    return node.op in VIEW_OPS or (node.op == "stride_order" and lays_out_as_is(producer, node))


def _is_set(fusion: Any, node: Any) -> bool:
    """A ``cast`` of a tensor to the dtype it has."""
    if node is None or node.opaque or node.op != "cast":
        return False
    types = fusion.types.of
    arg, out = types.get(node.arg("arg").id), types.get(node.outputs[0])
    tensors = hasattr(arg, "dims") and hasattr(out, "dims")  # TensorType (axes imports this module)
    return tensors and arg.dtype == out.dtype
