"""Tools that test eqsat: random fusions, the fuzzer and its judge, and the seed fusions of
the demo."""
