"""Tools that test eqsat: random fusions, the fuzzer and its judge, the seed fusions of the
demo, and the FP8 amax families (issue 17)."""
