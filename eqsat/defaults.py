"""Defaults that the API and the command line share, in a module that imports nothing (so
``eqsat --help`` can state them without importing torch or egglog)."""

# optimize_fusion's deadline_s: seconds for everything after reading the fusion. A backstop for
# pathological inputs, never what decides a normal result: work limits do (saturation's
# iterations and e-nodes, the extraction search's budget), so the result is the same on an idle
# or a busy machine (docs/limits-and-deadline.md).
DEADLINE_S = 60.0

# The least predicted saving worth a change where the profile has no error table (a profile's
# ``error``, eqsat.cost.error_table, gives the margin otherwise); why 5%: docs/cost-model.md.
MIN_GAIN = 0.05

# extract's search_budget: nodes scored by the local search, summed (the corpora use 6000 at most)
SEARCH_BUDGET = 30_000

# the extent assumed for a symbolic axis when no inputs are given
DEFAULT_EXTENT = 1024
