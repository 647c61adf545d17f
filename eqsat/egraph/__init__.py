"""The e-graph: terms (``terms``), their egglog vocabulary (``vocabulary``), the IR encoded
as terms (``encode``) and terms decoded back (``decode``), egglog text, the analyses (labels,
dtypes, signs), saturation, and exploration of what the rules derive."""
