"""How much work reading a repro file may do: every operation the reader evaluates is bounded
before it runs, so that a read answers at once or is refused with the line.

- Integers: no integer the reader makes, or is given as a literal, has more than
  :data:`MAX_INT_BITS` bits; a ``*``, ``**`` or ``<<`` whose result could is refused before it
  is computed (:func:`int_op_problem`), as is ``round(x, n)`` with ``|n|`` beyond
  :data:`MAX_NDIGITS` (rounding an int to ``-n`` digits computes ``10 ** n``).
- Python-level iteration of a tensor (``list(t)``, ``*t``, ``t.tolist()``): at most
  :data:`MAX_ITEMS` values.
- Tensor work: each torch function, tensor method or operator on tensors is first run on meta
  tensors of the same shapes, dtypes and strides (which computes nothing) to learn what it
  would allocate; it is charged the bytes of its tensor arguments (what it reads, unless all it
  returns are views) and of the new tensors it makes, and the reading of one file may be
  charged :data:`MAX_TENSOR_BYTES` in all (:class:`TensorWork`). Reading on the meta device
  costs nothing and is not charged.
"""

from __future__ import annotations

from typing import Any, Callable

MAX_INT_BITS = 4096
MAX_NDIGITS = len(str(1 << MAX_INT_BITS))  # 1234: 10 ** n for larger n passes MAX_INT_BITS
MAX_ITEMS = 1 << 16
MAX_TENSOR_BYTES = 16 << 30

# tensor methods that read no tensor data, or one element (metadata, .item(), flags)
NO_WORK = frozenset(
    "size stride dim numel element_size storage_offset is_contiguous item requires_grad_ manual_seed".split()
)


class TooMuchWork(ValueError):
    """An operation the reader refuses to run for the work or memory it would take."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int)  # bools too: True << n is an int


def int_op_problem(op: str, a: Any, b: Any) -> str | None:
    """Why ``a <op> b`` (op ``add``, ``sub``, ``mul``, ``pow`` or ``lshift``) is not computed: its
    result could pass :data:`MAX_INT_BITS` bits (judged from the operands' bit lengths, before
    computing anything); None where it cannot, or where an operand is no int."""
    if not (_is_int(a) and _is_int(b)):
        return None
    la, lb = a.bit_length(), b.bit_length()
    if op in ("add", "sub"):
        bits = max(la, lb) + 1
    elif op == "mul":
        bits = la + lb
    elif op == "pow":
        bits = 0 if b < 0 or abs(a) <= 1 else la * b
    elif op == "lshift":
        bits = 0 if b < 0 or a == 0 else la + b
    else:
        return None
    if bits <= MAX_INT_BITS:
        return None
    return f"its result would be an integer of up to {bits} bits; the reader makes none beyond {MAX_INT_BITS}"


def int_problem(value: Any) -> str | None:
    """Why the int ``value`` is refused (more than :data:`MAX_INT_BITS` bits); None otherwise."""
    if _is_int(value) and value.bit_length() > MAX_INT_BITS:
        return f"an integer of {value.bit_length()} bits; the reader takes none beyond {MAX_INT_BITS}"
    return None


def check_ndigits(ndigits: Any) -> None:
    """Raises TooMuchWork where ``round(x, ndigits)`` would compute ``10 ** |ndigits|`` too big."""
    if _is_int(ndigits) and abs(ndigits) > MAX_NDIGITS:
        raise TooMuchWork(f"round to {ndigits} digits: at most {MAX_NDIGITS} either way")


def check_items(value: Any, what: str, elements: bool = False) -> Any:
    """``value``, where iterating it (``what``) makes at most :data:`MAX_ITEMS` values: a
    tensor's rows (``elements``: its elements, as ``.tolist()`` makes)."""
    import torch

    if isinstance(value, torch.Tensor):
        n = value.numel() if elements else (len(value) if value.dim() else 0)
        if n > MAX_ITEMS:
            raise TooMuchWork(f"{what} of a tensor would make {n} Python values; at most {MAX_ITEMS}")
    return value


def _tensors(value: Any) -> list:
    """The tensors in ``value`` and the lists, tuples and dicts in it."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def on_meta(value: Any, made: dict) -> Any:
    """``value`` with each tensor replaced by an empty meta tensor of its shape, dtype and
    strides (``made``: the meta tensor of each, by id)."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.device.type == "meta":
            return value
        if id(value) not in made:
            made[id(value)] = torch.empty_strided(
                value.shape, value.stride(), dtype=value.dtype, device="meta"
            )
        return made[id(value)]
    if isinstance(value, list):
        return [on_meta(v, made) for v in value]
    if isinstance(value, tuple):
        return tuple(on_meta(v, made) for v in value)
    if isinstance(value, dict):
        return {k: on_meta(v, made) for k, v in value.items()}
    return value


def _bytes(t) -> int:
    return t.numel() * t.element_size()


class TensorWork:
    """The bytes of tensor data one file's reading has been charged, refused past ``limit``."""

    def __init__(self, limit: int | None = None):
        self.limit = MAX_TENSOR_BYTES if limit is None else limit
        self.spent = 0

    def charge(self, nbytes: int) -> None:
        """Adds ``nbytes``; TooMuchWork (and nothing added) past the limit."""
        if self.spent + nbytes > self.limit:
            raise TooMuchWork(
                f"it would take {_size(nbytes)} of tensor data, past the "
                f"{_size(self.limit)} reading a file may use ({_size(self.spent)} "
                "so far); read its inputs on the meta device (eqsat check --meta)"
            )
        self.spent += nbytes

    def run(
        self,
        real: Callable[[], Any],
        meta: Callable[[dict], Any] | None,
        operands: list,
        name: str | None = None,
    ) -> Any:
        """``real()``, charged first what ``meta(made)`` (the same operation on meta tensors,
        ``made`` mapping each real tensor's id to its meta one) allocates and reads of
        ``operands`` (the tensors the operation is given). ``name``: the torch function or
        tensor method's (an in-place one, ``x_``, reads what it writes; ``matmul`` does more).
        Where the operation cannot run on meta tensors, the operands are charged before and
        the new tensors after."""
        inputs = _tensors(operands)
        if meta is None:
            return real()
        made: dict = {}
        try:
            result = meta(made)
        except TooMuchWork:
            raise
        except Exception:  # no meta kernel, or data-dependent: charged after
            self.charge(sum(map(_bytes, inputs)))
            out = real()
            fresh = [t for t in _tensors(out) if not t._is_view() and all(t is not i for i in inputs)]
            self.charge(sum(t.untyped_storage().nbytes() for t in fresh))
            return out
        self.charge(self._cost(result, inputs, made, name or ""))
        return real()

    @staticmethod
    def _cost(result: Any, inputs: list, made: dict, name: str) -> int:
        """The work of an operation on ``inputs`` that gave ``result`` on meta: the larger of the
        bytes it reads and those it allocates (a pass over the data), and for a matmul the
        bytes of its products."""
        metas = list(made.values()) + [t for t in inputs if t.device.type == "meta"]
        outs = _tensors(result)
        fresh = [t for t in outs if not t._is_view() and all(t is not m for m in metas)]
        allocated = sum(t.untyped_storage().nbytes() for t in fresh)
        only_views = outs and not fresh and not name.endswith("_")
        read = 0 if only_views else sum(_bytes(t) for t in inputs if t.device.type != "meta")
        products = 0
        if name == "matmul" and outs and inputs and inputs[0].dim():
            products = outs[0].numel() * inputs[0].shape[-1] * outs[0].element_size()
        return max(allocated, read) + products


def _size(nbytes: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
