"""Generated fusions of any size, for the optimizer's time against fusion size
(bench/large.py) and the deadline's tests. Each maker takes a number of ops and returns
(definition function, make_inputs(M, K)).

The fusions: ``chain``, a pointwise chain over an
[M, N] input with a row sum broadcast back every 50 ops (a normalization-like block);
``elementwise``, a chain of adds and tanhs only; ``wide``, independent row sums of the input
times a constant, each its own output; and ``distributed``, a sum over the inner axis of
products of the input with row-broadcast weights, each block a place for the distribution
rewrite.
"""

from __future__ import annotations

import torch

from eqsat.ir.dtypes import DataType


def chain(ops: int):
    def definition(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        y, n = x, 1
        while n < ops:
            if n % 50 == 0:
                s = fd.ops.sum(y, dims=[1])
                y = fd.ops.sub(y, fd.ops.broadcast_in_dim(s, shape=x.shape(), broadcast_dims=[0]))
                n += 3
            else:
                y = fd.ops.add(fd.ops.mul(y, x), x) if n % 2 else fd.ops.tanh(y)
                n += 2 if n % 2 else 1
        fd.add_output(y)

    return definition, lambda m, k: [torch.randn(m, k)]


def distributed(ops: int):
    blocks = max(1, ops // 6)

    def definition(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        acc = None
        for i in range(blocks):
            wi = fd.ops.mul(w, fd.define_scalar(1.0 + i / blocks, dtype=DataType.Double))
            wb = fd.ops.broadcast_in_dim(wi, shape=x.shape(), broadcast_dims=[0])
            s = fd.ops.sum(fd.ops.mul(x, wb), dims=[1])
            acc = s if acc is None else fd.ops.add(acc, s)
        fd.add_output(acc)

    return definition, lambda m, k: [torch.randn(m, k), torch.randn(m)]


def elementwise(ops: int):
    def definition(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        y = x
        for i in range(ops):
            y = fd.ops.tanh(y) if i % 2 else fd.ops.add(y, x)
        fd.add_output(y)

    return definition, lambda m, k: [torch.randn(m, k)]


def wide(ops: int):
    blocks = max(1, ops // 3)

    def definition(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        for i in range(blocks):
            c = fd.define_scalar(1.0 + i / blocks, dtype=DataType.Double)
            fd.add_output(fd.ops.exp(fd.ops.sum(fd.ops.mul(x, c), dims=[1])))

    return definition, lambda m, k: [torch.randn(m, k)]


LARGE_FUSIONS = {"chain": chain, "elementwise": elementwise, "wide": wide, "distributed": distributed}
