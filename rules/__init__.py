"""Rewrite-rule families for eqsat's e-graph (installed as ``eqsat.rules``)."""
