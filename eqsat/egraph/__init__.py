"""The e-graph: terms (``terms``), their egglog vocabulary (``vocabulary``), the IR encoded
as terms (``encode``), egglog text (``egglog_text``: the one module on egglog's private API),
the analyses (labels, dtypes, signs), saturation, and exploration of what the rules derive.
Terms go back to the IR in ``eqsat.lowering.from_terms``."""
