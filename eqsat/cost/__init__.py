"""The cost model: which kernels nvFuser makes of a candidate (``segmenter``, one method per
scheduler rule, merging groups in the ``kernel_graph``; graph ``walks``), and what each costs
on a GPU, host included (``model``, with the constants of a ``profile``)."""
