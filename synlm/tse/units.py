"""The units a per-unit table can show (``synlm evaluate-syntax --units``), by benchmark: its
groups (BLiMP phenomena, SyntaxGym circuits, Marvin & Linzen sections) and its units
(paradigms, suites, Table 1 rows). Plain names only, so that the command checks ``--units``
before anything heavy is imported; ``synlm.tse.measures`` builds the rows."""

from __future__ import annotations

#: Each benchmark's group and unit (``pairs``: a researcher's own, as BLiMP).
UNIT_LEVELS = {"blimp": ("phenomenon", "paradigm"), "pairs": ("phenomenon", "paradigm"),
               "syntaxgym": ("circuit", "suite"), "marvin_linzen": ("section", "row")}
#: Every unit name, groups first.
UNITS = ("phenomenon", "circuit", "section", "paradigm", "suite", "row")
#: The units of the compact per-unit table: the groups.
GROUP_UNITS = ("phenomenon", "circuit", "section")
