"""Defaults that the API and the command line share, in a module that imports nothing (so
``eqsat --help`` can state them without importing torch or egglog)."""

# optimize_fusion's deadline_s: seconds for everything after reading the fusion. A backstop for
# pathological inputs, never what decides a normal result: work limits do (saturation's
# iterations and e-nodes, the extraction search's budget), so the result is the same on an idle
# or a busy machine. The slowest fusion of both corpora, the seeds and bench/large.py up to
# 8000 ops takes a fraction of it on a 2-core machine with both cores busy.
DEADLINE_S = 60.0

# The least predicted saving worth a change where the profile has no error table (a profile's
# ``error``, eqsat.cost.error_table, gives the margin by kernel count and time otherwise). On the
# H200 corpus run (bench/results), the three changes predicted to save 1.8-3.4% ran 13-39% slower.
MIN_GAIN = 0.05
