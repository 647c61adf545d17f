"""What eqsat's results are checked against: the torch executor (nvFuser's semantics in
torch, including its Philox random numbers; ``run_fusion(strict=True)`` checks each result's
dtype and shape against the IR instead of casting), the eager executor (the user's calls run
straight on torch), every check of a caller's inputs (``inputs``), comparison within dtype
tolerance, fresh device copies and in-range indices."""
