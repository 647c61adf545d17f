"""The IR: a fusion as a straight-line list of nvFuser calls (``nodes``, ``fusion``), the op
table (``opspec``), dtypes (every dtype rule: promotion, compute and sum types), the types and
axis labels derived from the nodes (``axes``), layout (stride orders, contiguity and the
strides they imply), printing, Python operators on definition values (``operators``), and
``replay``, the IR's interpreter (the protocol every executor and lowering runs)."""

from .fusion import Fusion, Node, Output, Ref

__all__ = ["Fusion", "Node", "Output", "Ref"]
