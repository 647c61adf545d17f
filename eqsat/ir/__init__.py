"""The IR: a fusion as a straight-line list of nvFuser calls (``fusion``), the op table
(``opspec``), dtypes, the types and axis labels derived from the nodes (``axes``), printing,
and ``replay``, the IR's interpreter (the protocol every executor and lowering runs)."""
from .fusion import Fusion, Node, Output, Ref

__all__ = ["Fusion", "Node", "Output", "Ref"]
