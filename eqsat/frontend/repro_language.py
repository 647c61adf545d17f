"""What the repro language admits (:class:`eqsat.frontend.reader.Reader` evaluates it): the
torch functions, namespaces and tensor methods an input expression may use, the builtins
(bounded: :mod:`eqsat.frontend.bounds`), and Python's operators on numbers."""

from __future__ import annotations

import ast
import operator
from typing import Callable

from .bounds import check_items, check_ndigits


# torch functions an input expression may call: tensor constructors, random draws (under the
# global seed), and pure math on tensors
TORCH_FUNCTIONS = frozenset(
    """
    randn rand randint zeros ones full arange empty empty_strided tensor as_tensor linspace eye
    zeros_like ones_like full_like empty_like randn_like rand_like randint_like
    manual_seed cat stack where tril triu flip roll transpose permute reshape unsqueeze squeeze
    lt le gt ge eq ne abs neg exp log sqrt rsqrt sin cos tanh sigmoid erf softmax log_softmax
    clamp maximum minimum matmul mul add sub div pow sum mean amax amin var std
""".split()
)
TORCH_NAMESPACES = {
    "testing": frozenset({"make_tensor"}),
    "nn": frozenset({"functional"}),
    "nn.functional": frozenset(
        "softmax log_softmax relu gelu silu tanh sigmoid dropout layer_norm normalize pad one_hot".split()
    ),
}
# tensor methods and attributes an input expression may use
TENSOR_METHODS = frozenset(
    """
    to cuda cpu float half bfloat16 double int long short bool char byte type_as
    as_strided expand expand_as broadcast_to t permute transpose movedim swapaxes reshape view
    view_as unflatten contiguous clone
    unsqueeze squeeze flatten narrow select repeat flip tril triu detach requires_grad_
    mul add sub div true_divide clamp clamp_min clamp_max abs neg exp log sqrt rsqrt sin cos
    tanh sigmoid pow reciprocal square log1p expm1 floor ceil round sign max min
    mean var std sum amax amin softmax log_softmax lt le gt ge eq ne
    masked_fill fill_ zero_ uniform_ normal_ random_ bernoulli_ new_zeros new_ones new_empty
    new_full size stride dim numel element_size storage_offset item tolist
    shape dtype T mT ndim device is_contiguous
""".split()
)


def bounded_round(number, ndigits=None):
    check_ndigits(ndigits)
    return round(number, ndigits)


def iterating_bounded(fn: Callable) -> Callable:
    """``fn`` (list, tuple, min, max), iterating a tensor it is given only up to MAX_ITEMS rows."""

    def call(*args, **kwargs):
        if len(args) == 1:
            check_items(args[0], f"{fn.__name__}()")
        return fn(*args, **kwargs)

    call.__name__ = fn.__name__
    return call


BUILTINS: dict[str, Callable] = {
    "float": float,
    "int": int,
    "bool": bool,
    "complex": complex,
    "len": len,
    "abs": abs,
    "min": iterating_bounded(min),
    "max": iterating_bounded(max),
    "round": bounded_round,
    "list": iterating_bounded(list),
    "tuple": iterating_bounded(tuple),
}
NO_WORK_BUILTINS = frozenset({"float", "int", "bool", "complex", "len", "list", "tuple"})
# floats Python prints as bare names
NON_FINITE = {"nan": float("nan"), "inf": float("inf")}
BINARY_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
UNARY_OPERATORS = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}
COMPARISONS = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
INT_OPERATORS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Pow: "pow", ast.LShift: "lshift"}


FACTORIES = frozenset(
    "randn rand randint zeros ones full arange empty empty_strided tensor "
    "as_tensor linspace eye make_tensor".split()
)
