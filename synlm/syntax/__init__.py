"""Trees, targets, decoders. Imports nothing of synlm above this floor."""

from synlm.syntax.distances import (
    BASELINES,
    baseline_tree,
    distances_to_tree,
    palm_tree,
    tree_to_distances,
)
from synlm.syntax.heads import project_heads, tree_to_heads
from synlm.syntax.readers import ReaderError, read_conllu, read_malt_zip, read_trees
from synlm.syntax.sentence import Sentence
from synlm.syntax.targets import SyntaxTargets, build_targets, cached_targets, max_distance
from synlm.syntax.trees import binarize, read_brackets, skeleton, spans, to_bracket

__all__ = [
    "BASELINES",
    "ReaderError",
    "Sentence",
    "SyntaxTargets",
    "baseline_tree",
    "binarize",
    "build_targets",
    "cached_targets",
    "distances_to_tree",
    "max_distance",
    "palm_tree",
    "project_heads",
    "read_brackets",
    "read_conllu",
    "read_malt_zip",
    "read_trees",
    "skeleton",
    "spans",
    "to_bracket",
    "tree_to_distances",
    "tree_to_heads",
]
