"""The optimization pipeline, one module per stage, in the order they run (``driver``):

- ``options``: ``Options``, what one optimization is asked to do, validated once;
- ``context``: ``read`` (the definition read and typed, its inputs checked, the process's
  e-graph made; the deadline starts), the ``Run`` every stage is handed, and the ``Pick``;
- ``analyse``: encode, saturate, dump, and the cost model's estimate of the input;
- ``choose``: extract, the margin, the rules credited, lowering (``lower``) and the fresh
  estimate of what was lowered;
- ``verify``: under verify="gpu", the GPU's decision;
- ``report``: ``Report``, ``Rejection``, ``SaturationSummary``.

``eqsat.optimize`` is the public API over it; ``eqsat.deadline`` the deadline every stage takes.
Importing this package imports none of its modules.
"""
