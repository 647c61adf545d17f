"""What the cost model reads and predicts: a candidate's nodes (:class:`GNode`), and its
prediction (:class:`Estimate`: the kernels, the host's cost, what the kernels recompute and the
tensors they hand one another)."""

from __future__ import annotations

from dataclasses import dataclass, field

from eqsat.egraph.terms import SCALAR_TERMS

from .profile import KernelKind


@dataclass(frozen=True)
class GNode:
    """A node of a candidate: constructor, attributes, children (node ids), and the analyses
    of its class: label mask and dtype code."""

    op: str
    attrs: tuple
    kids: tuple
    labels: int
    dtype: int

    @property
    def is_scalar(self) -> bool:
        return self.dtype >= 100 or self.op in SCALAR_TERMS

    @property
    def space(self) -> int:
        """Labels of the iteration space: a reduction iterates over its input's."""
        return self.labels


@dataclass
class Kernel:
    """One predicted kernel: its kind (the profile's constants it is priced with), its ops, the
    bytes it reads and writes in global memory, its arithmetic and its time. ``reads`` and
    ``writes``: the tensors behind ``bytes_read`` and ``bytes_written``, node id -> bytes (the
    ids are the estimate's own: ``Estimate.tensors`` describes each); they say which kernel
    hands which tensor to which. ``bound``: "memory" where its bytes at the kind's bandwidth
    take longer than its arithmetic and its random draws (``drawn``: how many numbers), else
    "compute". These are for a picture of the kernels (``eqsat.cost.drawing``), and take no part
    in the prediction or in comparing kernels."""

    kind: KernelKind
    ops: list[str]
    bytes_read: int
    bytes_written: int
    flops: float
    time_us: float
    recomputed: int = 0  # nodes of other kernels it computes again from the inputs
    reads: dict[int, int] = field(default_factory=dict, compare=False, repr=False)
    writes: dict[int, int] = field(default_factory=dict, compare=False, repr=False)
    bound: str = field(default="memory", compare=False, repr=False)  # or "compute": what its time is
    drawn: int = field(default=0, compare=False, repr=False)  # random numbers it draws

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


@dataclass(frozen=True)
class Recomputation:
    """A chain of elementwise nodes (``cone``) that one kernel computes again from the fusion's
    inputs instead of reading it from the kernel that wrote it; ``readers``: the kernel's
    nodes that read the chain (eqsat's lowering feeds them a copy of it)."""

    cone: frozenset
    readers: frozenset


@dataclass(frozen=True)
class Tensor:
    """A tensor some kernel of an estimate reads or writes (``Kernel.reads``, ``Kernel.writes``):
    its dtype's name, its extents (``shape``: the definition's dims where the estimate was
    made of a definition, else one extent per axis it varies along), its bytes in global
    memory, whether it is one of the fusion's outputs, and where no kernel writes it, what
    does (``source``): "input" (the fusion's), the op nvFuser runs outside the kernels the
    cost model prices ("matmul", "segment_set"...), or the op of a value no kernel computes
    (a view such as "reshape"), made of the tensors ``of`` (node ids). ``name``: the
    definition's value (``T3``, as eqsat prints definitions), where known."""

    dtype: str
    shape: tuple[int, ...] | None  # None: unknown (the output of an op eqsat does not model)
    bytes: int
    output: bool = False
    source: str | None = None
    name: str | None = None
    of: tuple[int, ...] = ()


@dataclass
class Estimate:
    """The cost model's prediction for a candidate: its kernels (dearest first) and the host's
    cost per ``execute``. ``tensors`` (node id -> :class:`Tensor`: what the kernels read and
    write) and ``barriers`` (an op's output node -> (the op, its input nodes), for the ops
    nvFuser runs outside these kernels, such as matmul) describe how the kernels connect; they
    take no part in the prediction or in comparing estimates."""

    kernels: list[Kernel] = field(default_factory=list)
    host_us: float = 0.0
    recomputed: list[Recomputation] = field(default_factory=list)
    tensors: dict[int, Tensor] = field(default_factory=dict, compare=False, repr=False)
    barriers: dict[int, tuple[str, tuple[int, ...]]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def bytes(self) -> int:
        return sum(k.bytes for k in self.kernels)

    @property
    def flops(self) -> float:
        return sum(k.flops for k in self.kernels)

    @property
    def device_us(self) -> float:
        """The kernels' own time (no host cost)."""
        return sum(k.time_us for k in self.kernels)

    @property
    def time_us(self) -> float:
        return self.host_us + self.device_us

    def summary(self) -> dict:
        return {
            "kernels": len(self.kernels),
            "bytes": self.bytes,
            "flops": self.flops,
            "time_us": round(self.time_us, 3),
            "device_us": round(self.device_us, 3),
        }

    def explain(self) -> str:
        lines = [
            f"{len(self.kernels)} kernels, {self.bytes / 1e6:.3f} MB, {self.flops / 1e6:.3f} MFLOP, "
            f"{self.time_us:.1f} us (host {self.host_us:.0f} us)"
        ]
        for i, k in enumerate(self.kernels):
            ops = ", ".join(_counted(k.ops))
            again = f", recomputing {k.recomputed} values of other kernels" if k.recomputed else ""
            lines.append(
                f"  kernel {i} [{k.kind}]: read {k.bytes_read / 1e6:.3f} MB, write "
                f"{k.bytes_written / 1e6:.3f} MB, {k.flops / 1e6:.3f} MFLOP, {k.time_us:.1f} us"
                f"{again}: {ops}"
            )
        return "\n".join(lines)


def _counted(ops):
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return [f"{op}×{n}" if n > 1 else op for op, n in counts.items()]
