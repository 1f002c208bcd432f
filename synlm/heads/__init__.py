"""Plug-in syntax heads. Importing this package registers them for short class names."""

from synlm.heads.base import SyntaxHead
from synlm.heads.dependency import DependencyMixtureHead
from synlm.heads.distance import DistanceRankingHead
from synlm.heads.span import SpanHead
from synlm.heads.tree_planting import TreePlantingHead
from synlm.heads.tree_reg import TreeRegHead

__all__ = ["DependencyMixtureHead", "DistanceRankingHead", "SpanHead", "SyntaxHead",
           "TreePlantingHead", "TreeRegHead"]
