"""Plug-in syntax heads. Importing this package registers them for short class names."""

from synlm.heads.base import SyntaxHead

__all__ = ["SyntaxHead"]
