"""What eqsat's results are checked against: the torch executor (nvFuser's semantics in
torch, including its Philox random numbers), comparison within dtype tolerance, and inputs
(fresh device copies, indices kept in range)."""
