"""The trivial tree shapes ``baseline_tree`` (``synlm.syntax.distances``) draws, by name: a
module of its own so that a command line offers them without importing nltk."""

BASELINES = ("left-branching", "right-branching", "balanced", "random")
