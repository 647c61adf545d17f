"""The cost model: how nvFuser segments a candidate into kernels (``model``, with the
``kernel_graph`` it merges groups in) and what each kernel costs on a GPU (``profile``)."""
