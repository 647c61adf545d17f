"""Tools that test eqsat: random fusions, the fuzzer and its judge, the seed fusions of the
demo, the FP8 amax families (issue 17), and small models in plain torch for Thunder."""
