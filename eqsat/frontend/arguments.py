"""An op's arguments in canonical form, as the recorder stores them (:func:`normalize`): dims
in range of their operand's rank, non-negative and sorted; flags as bools; dtypes coerced."""

from __future__ import annotations

from typing import Any

from eqsat.ir import dtypes as dt
from eqsat.ir.axes import AxisInference, TensorType
from eqsat.ir.dtypes import DataType
from eqsat.ir.fusion import Ref
from eqsat.ir.opspec import OpSpec


def _rank_of(ref, inference: AxisInference) -> int | None:
    t = inference.types.get(ref.id) if isinstance(ref, Ref) else None
    if not isinstance(t, TensorType):
        raise TypeError(
            f"expected a tensor, got {'a scalar' if t is not None or not isinstance(ref, Ref) else ref!r}"
        )
    return t.rank


def _dim_list(value, rank, what="dims") -> tuple[int, ...]:
    """``value`` (None: every dim; an int or a list of them) as sorted non-negative dims."""
    if value is None:
        return tuple(range(rank))
    items = (value,) if isinstance(value, int) else tuple(value)
    out = []
    for d in items:
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(f"{what} must be ints, got {value!r}")
        if rank is not None and not -rank <= d < rank:  # a rank-0 tensor has no dims
            raise ValueError(f"{what} entry {d} is out of range for a tensor of rank {rank}")
        out.append(d % rank if rank else d)
    if len(set(out)) != len(out):
        raise ValueError(f"{what} {list(items)} repeats a dim")
    return tuple(sorted(out))


def _one_dim(value, rank, what="dim") -> int:
    return _dim_list(int(value) if not isinstance(value, bool) else value, rank, what)[0]


FLAGS = (
    "keepdim",
    "squeeze_expanded",
    "manual_padding",
    "manual_normalization",
    "largest",
    "sorted",
    "descending",
    "stable",
)


def normalize(spec: OpSpec, args: dict[str, Any], inference: AxisInference) -> dict[str, Any]:
    """Canonical argument values: dims non-negative and sorted, flags as bools, dtypes coerced."""
    if args.get("dtype") is not None:
        args["dtype"] = dt.coerce(args["dtype"])
    cat = spec.category
    _normalize_dims(cat, args, inference)
    for flag in FLAGS:
        if flag in args:
            args[flag] = bool(args[flag])
    if cat == "permute":
        args["dims"] = tuple(args["dims"])
    if cat == "broadcast":
        args["is_broadcast_dim"] = tuple(bool(b) for b in args["is_broadcast_dim"])
    if cat == "broadcast_in_dim":
        bd = args["broadcast_dims"]
        args["broadcast_dims"] = (bd,) if isinstance(bd, int) else tuple(bd)
    if cat in ("cast",) and not isinstance(args["dtype"], DataType):
        raise ValueError(f"dtype must be a DataType, got {args['dtype']!r}")
    for key in ("shape", "new_shape"):
        if key in args and isinstance(args[key], int):
            args[key] = (args[key],)
    return args


def _normalize_dims(cat: str, args: dict[str, Any], inference: AxisInference) -> None:
    """A reduction's or squeeze's ``dims``, and the ``dim`` of the ops that take one, in range
    of their operand's rank, non-negative and sorted."""
    if cat in ("reduction", "var", "var_mean", "welford", "squeeze"):
        if "arg" in args and isinstance(args["arg"], Ref):
            rank = _rank_of(args["arg"], inference)
            if rank is not None:
                args["dims"] = _dim_list(args["dims"], rank)
    if cat in ("size",):
        rank = _rank_of(args["arg"], inference)
        if rank is not None:
            args["dim"] = _one_dim(args["dim"], rank)
    if cat in ("gather", "index_select", "topk", "argsort", "scan", "scatter"):
        rank = _rank_of(args["arg"], inference)
        # nvFuser sorts a rank-0 tensor as it is (a topk of itself, an argsort of 0)
        if rank is not None and not (rank == 0 and cat in ("topk", "argsort")):
            args["dim"] = _one_dim(args["dim"], rank)
    if cat == "cat":
        tensors = args["tensors"]
        if not isinstance(tensors, tuple) or not tensors:
            raise ValueError("tensors must be a non-empty list of tensors")
        rank = _rank_of(tensors[0], inference)
        if rank is not None:
            args["dim"] = _one_dim(args["dim"], rank)
