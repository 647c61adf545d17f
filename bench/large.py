"""Optimizer time against fusion size: generated fusions of a few dozen to a few thousand ops,
optimized under the default limits; each result is checked against the input through the
torch executor on small tensors. Prints ops, e-nodes, why saturation stopped, the
saturation and total optimizer time, and predicted kernels before and after.

    python bench/large.py [--sizes 100,300,1000,3000] [--json out.json]

The fusions (written here, not taken from anywhere): ``chain``, a pointwise chain over an
[M, N] input with a row sum broadcast back every 50 ops (a normalization-like block); and
``distributed``, a sum over the inner axis of products of the input with row-broadcast
weights, each block a place for the distribution rewrite.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

import eqsat
from eqsat import DataType
from eqsat.compare import mismatch


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


KINDS = {"chain": chain, "distributed": distributed}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,300,1000,3000")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    eqsat.optimize_fusion(chain(10)[0])             # compiles the rules: not timed
    rows = []
    print(f"{'fusion':>12s} {'ops':>5s} {'IR':>5s} {'e-nodes':>8s} {'stop':>16s} {'sat s':>6s} "
          f"{'total s':>7s} {'kernels':>9s}  ok")
    for kind, make in KINDS.items():
        for size in (int(s) for s in args.sizes.split(",")):
            definition, make_inputs = make(size)
            fusion = eqsat.ingest(definition)
            start = time.perf_counter()
            opt = eqsat.optimize_fusion(fusion, make_inputs(4096, 4096))
            total = time.perf_counter() - start
            r = opt.report
            small = make_inputs(8, 16)
            want = eqsat.run_fusion(fusion, small)
            got = opt.run_reference(small)
            problems = [p for p in (mismatch(g, w) for g, w in zip(got, want)) if p]
            stop = r.saturation.split(" after ")[0]
            nodes = r.saturation.rsplit(", ", 1)[-1].split()[0] if "e-nodes" in r.saturation else "-"
            sat_s = r.phases.get("saturate", float("nan"))
            row = dict(kind=kind, ops=size, ir_nodes=len(fusion.nodes), e_nodes=nodes, stop=stop,
                       saturation_s=sat_s, total_s=round(total, 3),
                       phases=r.phases, kernels_before=len(r.before.kernels),
                       kernels_after=len(r.after.kernels),
                       changed=r.changed, ok=not problems, notes=r.notes)
            rows.append(row)
            print(f"{kind:>12s} {size:5d} {len(fusion.nodes):5d} {nodes:>8s} {stop:>16s} {sat_s:6.2f} "
                  f"{total:7.2f} {len(r.before.kernels):4d}->{len(r.after.kernels):<4d} {'yes' if not problems else problems}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
