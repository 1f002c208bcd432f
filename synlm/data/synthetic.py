"""A seeded synthetic treebank: a small head-annotated PCFG with left- and right-branching
rules. It is the bundled default corpus: it needs no download and its gold constituency
trees and dependency heads are known exactly."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass

from nltk import Tree

from synlm.data.corpora import Corpus
from synlm.syntax import Sentence


@dataclass(frozen=True)
class Rule:
    """``label -> children`` with probability ``p``; ``head`` indexes the head child."""

    p: float
    children: tuple[str, ...]
    head: int
    recursive: bool = False


# Right-branching: VP -> VBD NP, VP -> VBD SBAR, PP -> IN NP, SBAR -> IN S.
# Left-branching: NP -> NP PP, NP -> NP POS NN (possessive), VP -> VP PP.
GRAMMAR: dict[str, tuple[Rule, ...]] = {
    "S": (Rule(1.0, ("NP", "VP", "."), head=1),),
    "NP": (
        Rule(0.40, ("DT", "NN"), head=1),
        Rule(0.20, ("DT", "JJ", "NN"), head=2),
        Rule(0.12, ("PRP",), head=0),
        Rule(0.16, ("NP", "PP"), head=0, recursive=True),
        Rule(0.12, ("NP", "POS", "NN"), head=2, recursive=True),
    ),
    "VP": (
        Rule(0.40, ("VBD", "NP"), head=0),
        Rule(0.20, ("VBD",), head=0),
        Rule(0.25, ("VP", "PP"), head=0, recursive=True),
        Rule(0.15, ("VBD", "SBAR"), head=0, recursive=True),
    ),
    "PP": (Rule(1.0, ("IN", "NP"), head=0),),
    "SBAR": (Rule(1.0, ("IN_THAT", "S"), head=0),),
}

LEXICON: dict[str, tuple[str, ...]] = {
    "DT": ("the", "a", "every", "some", "this", "that"),
    "JJ": ("old", "red", "quiet", "small", "clever", "green", "happy", "tall", "strange",
           "young"),
    "NN": ("dog", "cat", "bird", "teacher", "child", "farmer", "house", "garden", "river",
           "book", "letter", "window", "table", "doctor", "king", "song", "road", "city",
           "friend", "boat", "apple", "stone", "lamp", "horse"),
    "PRP": ("she", "he", "it", "they", "we"),
    "POS": ("'s",),
    "VBD": ("saw", "liked", "found", "took", "heard", "followed", "painted", "wanted",
            "visited", "carried", "knew", "slept", "laughed", "waited"),
    "IN": ("with", "near", "in", "on", "under", "behind", "from"),
    "IN_THAT": ("that",),
    ".": (".",),
}


class SyntheticTreebank(Corpus):
    """Sentences sampled from ``GRAMMAR``, reproducible from ``seed``.

    Words are drawn Zipf-like within each part of speech. Recursive rules are barred
    below ``max_depth`` and sentences longer than ``max_length`` words are redrawn,
    so every split has the same distribution. Each ``Sentence`` carries its tree
    (part-of-speech preterminals, phrase labels NP/VP/PP/SBAR/S), its POS tags and its
    dependency heads (from the rules' head children). Its words are lowercase already and
    its vocabulary is closed, so raw words are used as they are (``none``).
    """

    name = "synthetic"
    gold = frozenset({"constituency", "dependency"})

    def __init__(
        self,
        data_dir: str | None = None,
        n_train: int = 4000,
        n_valid: int = 400,
        n_test: int = 400,
        seed: int = 1234,
        max_depth: int = 5,
        max_length: int = 24,
    ) -> None:
        super().__init__(data_dir)
        self.sizes = {"train": n_train, "valid": n_valid, "test": n_test}
        self.seed = seed
        self.max_depth = max_depth
        self.max_length = max_length

    def sentences(self, split: str) -> list[Sentence]:
        offset = self.splits.index(split)
        rng = random.Random(f"{self.seed}-{offset}")
        out = []
        while len(out) < self.sizes[split]:
            tree, heads = self._expand("S", rng, depth=0)
            words = tree.leaves()
            if len(words) <= self.max_length:
                tags = [tag for _, tag in tree.pos()]
                source = f"synthetic:{split}:{len(out) + 1}"
                out.append(Sentence(words, tree=tree, heads=heads, tags=tags, source=source))
        return out

    def cache_key(self) -> str:
        options = [self.sizes, self.seed, self.max_depth, self.max_length]
        grammar = json.dumps([options, repr(GRAMMAR), LEXICON], sort_keys=True)
        return f"synthetic-{hashlib.sha256(grammar.encode()).hexdigest()[:16]}"

    def _expand(self, label: str, rng: random.Random, depth: int) -> tuple[Tree, list[int]]:
        """Sample a subtree for ``label``; return it with its words' heads, where a head
        is a 1-based index into the subtree's words and 0 marks the subtree's own head."""
        if label in LEXICON:
            words = LEXICON[label]
            weights = [1.0 / (rank + 1) for rank in range(len(words))]
            tag = "IN" if label == "IN_THAT" else label
            return Tree(tag, [rng.choices(words, weights)[0]]), [0]
        rules = [r for r in GRAMMAR[label] if depth < self.max_depth or not r.recursive]
        rule = rng.choices(rules, [r.p for r in rules])[0]
        children, child_heads, offsets, n = [], [], [], 0
        for child in rule.children:
            subtree, heads = self._expand(child, rng, depth + 1)
            children.append(subtree)
            child_heads.append(heads)
            offsets.append(n)
            n += len(heads)
        # The lexical head of a child is the word whose head is 0 inside that child.
        lexical = [off + hs.index(0) + 1 for off, hs in zip(offsets, child_heads)]
        heads: list[int] = []
        for i, (off, hs) in enumerate(zip(offsets, child_heads)):
            for h in hs:
                if h:
                    heads.append(off + h)
                else:
                    heads.append(0 if i == rule.head else lexical[rule.head])
        return Tree(label, children), heads
