"""Gold dependency heads of constituency trees, as unsupervised dependency parsing scores them
(docs/evaluation.md, "Dependency accuracy on constituency trees").

StructFormer (Shen et al. 2021, ``tree_utils.get_dep``) and UDGN (Shen et al. 2022,
``data_dep.Corpus.tokenize``) read heads that a converter wrote for every token of a tree, then
keep the tokens whose POS tag is one of the 36 word tags (``WORD_TAGS``: punctuation, ``$``,
``#`` and traces go) and re-attach a kept word whose head is a dropped token to that token's
head, climbing until a kept word or the root: ``kept_heads``. Their converter is an external
tool (the papers' Stanford dependencies), not part of their code; synlm converts by head
rules (``tree_heads``), by default Yamada & Matsumoto (2003)'s table (``YAMADA_RULES``) with
what NLTK's ``dependency_treebank`` (a Penn2Malt-style conversion of the NLTK Penn Treebank
sample) shows of Penn2Malt's use of it: the nouns of an NP as one group, a punctuation mark
never the head where no entry of the list matches, ``X`` headed by its last child. These
give NLTK's heads for 99.96% of its tokens (94,042 of 94,084) and, once both pass
``kept_heads``, 99.95% of its words; Collins (1999)'s table (``COLLINS_RULES``, the DMLM
targets') is the other choice (88.11% of the words). ``read_gold_heads`` reads a converter's
heads instead (``synlm parse --gold-heads``), such as the papers' Stanford dependencies, from
which these tables put about 30% of the words on another head. Light: no torch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from nltk import Tree

from synlm.errors import InputError
from synlm.syntax.heads import COLLINS_RULES, HeadRules, tree_to_heads
from synlm.syntax.protocols import PROTOCOLS
from synlm.syntax.readers import read_conllu
from synlm.syntax.trees import WORD_TAGS, clean_tree, words_and_tags


def _table(rows: str) -> HeadRules:
    """``LABEL l|r TAG ...`` rows (``l``: scan the children left to right; ``r``: right to
    left; ``A|B``: a group of labels of equal priority)."""
    out: HeadRules = {}
    for row in rows.strip().splitlines():
        label, direction, *priority = row.split()
        out[label] = ("left" if direction == "l" else "right",
                      tuple(frozenset(p.split("|")) if "|" in p else p for p in priority))
    return out


#: Yamada & Matsumoto (2003)'s head table, as NLTK's dependency treebank shows Penn2Malt
#: applying it: for each entry of the priority list in turn, the first child in the
#: direction that carries it is the head (without one, the first child in the direction
#: that is not a punctuation mark, ``PUNCTUATION_TAGS``); NP and NX take the nouns (and POS,
#: JJR) as one group, rightmost first, then CD, then the other modifiers as one group, then
#: NP; X (not in the table) takes its last child.
YAMADA_RULES: HeadRules = _table("""
ADJP r NNS QP NN $ ADVP JJ VBN VBG ADJP JJR NP JJS DT FW RBR RBS SBAR RB
ADVP l RB RBR RBS FW ADVP TO CD JJR JJ IN NP JJS NN
CONJP l CC RB IN
FRAG l
INTJ r
LST l LS :
NAC r NN NNS NNP NNPS NP NAC EX $ CD QP PRP VBG JJ JJS JJR ADJP FW
NP r POS|NN|NNP|NNPS|NNS|NX|JJR CD JJ|JJS|RB|QP NP
NX r POS|NN|NNP|NNPS|NNS|NX|JJR CD JJ|JJS|RB|QP NP
PP l IN TO VBG VBN RP FW
PRN r
PRT l RP
QP r $ IN NNS NN JJ RB DT CD NCD QP JJR JJS
RRC l VP NP ADVP ADJP PP
S r TO IN VP S SBAR ADJP UCP NP
SBAR r WHNP WHPP WHADVP WHADJP IN DT S SQ SINV SBAR FRAG
SBARQ r SQ S SINV SBARQ FRAG
SINV r VBZ VBD VBP VB MD VP S SINV ADJP NP
SQ r VBZ VBD VBP VB MD VP SQ
UCP l
VP l VBD VBN MD VBZ VB VBG VBP VP ADJP NN NNS NP
WHADJP r CC WRB JJ ADJP
WHADVP l CC WRB
WHNP r WDT WP WP$ WHADJP WHPP WHNP
WHPP l IN TO FW
X r
""")

#: The punctuation tags of the released ``data_ptb.py`` (``PUNCTUATION_TAGS``), which the
#: Yamada table's fallback never makes a head.
PUNCTUATION_TAGS = frozenset({".", ",", ":", "-LRB-", "-RRB-", "''", "``"})

#: The head tables by name (``synlm parse --head-rules``), each with the tags its fallback
#: passes over.
HEAD_RULES: dict[str, tuple[HeadRules, frozenset[str]]] = {
    "yamada": (YAMADA_RULES, PUNCTUATION_TAGS), "collins": (COLLINS_RULES, frozenset())}


def tree_heads(tree: Tree, rules: str = "yamada") -> tuple[list[str], list[str], list[int]]:
    """Words, POS tags and heads (1-based, 0 = root) of every token of ``tree`` but its empty
    elements (``-NONE-`` traces, removed with the constituents they leave empty, as the
    converters do), punctuation included, by the head table ``rules``."""
    if rules not in HEAD_RULES:
        raise ValueError(f"head rules must be one of {sorted(HEAD_RULES)}, not {rules!r}")
    clean = clean_tree(tree)
    if clean is None:
        return [], [], []
    words, tags = words_and_tags(clean)
    table, skip = HEAD_RULES[rules]
    return words, tags, tree_to_heads(clean, table, n=len(words), skip=skip)


def kept_heads(heads: Sequence[int], keep: Sequence[bool]) -> list[int]:
    """The heads (1-based among the kept tokens, 0 = root) of the tokens that ``keep`` marks:
    a head that is dropped is replaced by its own head until a kept token or the root (the
    released ``get_dep``'s climb), so a word under a punctuation mark attaches above it and
    a sentence whose root is dropped can have several roots."""
    index = [0] * (len(heads) + 1)  # 1-based token -> 1-based kept position (0: dropped)
    kept = 0
    for i, k in enumerate(keep, 1):
        if k:
            kept += 1
            index[i] = kept
    out = []
    for i, k in enumerate(keep):
        if k:
            h = heads[i]
            while h and not keep[h - 1]:
                h = heads[h - 1]
            out.append(index[h])
    return out


class Gold(NamedTuple):
    """Scored sentences: the words the model reads (the tree's), their gold heads, and the
    words as the gold file wrote them (a converter may undo PTB escapes: ``3/4`` for the
    tree's ``3\\/4``), which StructFormer's word pairs name."""

    words: list[list[str]]
    heads: list[list[int]]
    gold_words: list[list[str]]


def evaluation_heads(tree: Tree, rules: str = "yamada", keep_tags: frozenset[str] = WORD_TAGS,
                     converted: tuple[list[str], list[int]] | None = None
                     ) -> tuple[list[str], list[int], list[str]]:
    """The words of ``tree`` whose tags ``keep_tags`` holds (those of ``evaluation_tree``,
    in order), their gold heads and their gold file's words: a converter's words and heads
    of every token but the traces (``converted``, from ``read_gold_heads``), or else the
    tree's words with ``tree_heads``' by ``rules``, then ``kept_heads``."""
    words, tags, ruled = tree_heads(tree, rules)
    keep = [tag in keep_tags for tag in tags]
    written, heads = (words, ruled) if converted is None else converted
    return ([w for w, k in zip(words, keep) if k], kept_heads(heads, keep),
            [w for w, k in zip(written, keep) if k])


def evaluation_dependencies(trees: Sequence[Tree], protocol: str = "onlstm",
                            rules: str = "yamada", max_length: int | None = None,
                            converted: Sequence[tuple[list[str], list[int]]] | None = None
                            ) -> Gold:
    """``evaluation_heads`` over ``protocol``'s word tags (``converted``: a converter's words
    and heads for each tree) of the trees whose word count ``protocol`` keeps and that have
    at most ``max_length`` words."""
    p = PROTOCOLS[protocol]
    longest = min(n for n in (p.max_length, max_length, float("inf")) if n)
    out = Gold([], [], [])
    for i, tree in enumerate(trees):
        words, heads, written = evaluation_heads(tree, rules, p.keep_tags,
                                                 None if converted is None else converted[i])
        if max(p.min_length, 1) <= len(words) <= longest:
            out.words.append(words)
            out.heads.append(heads)
            out.gold_words.append(written)
    return out


#: The PTB escapes a converter may undo in its output (CoreNLP writes ``(`` for ``-LRB-``).
_BRACKETS = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]"}


def _unescaped(word: str) -> str:
    """``word`` without its PTB escapes: ``-LRB-`` as ``(``, ``3\\/4`` as ``3/4``."""
    return _BRACKETS.get(word, re.sub(r"\\(.)", r"\1", word))


def read_gold_heads(path: str, trees: Sequence[Tree]) -> list[tuple[list[str], list[int]]]:
    """The words and heads a converter wrote for ``trees`` (``--gold-heads``): a CoNLL-X or
    CoNLL-U file of one sentence a tree, in order, each over the tree's tokens but its traces
    (as CoreNLP's ``EnglishGrammaticalStructure -basic -conllx -treeFile`` writes them; PTB
    escapes may be undone). A malformed file, another count of sentences, or a sentence whose
    words are not its tree's, is an ``InputError`` naming the file and line."""
    try:
        sentences = read_conllu(path)
    except InputError as err:
        raise InputError(f"--gold-heads: {err}") from None
    if len(sentences) != len(trees):
        raise InputError(f"--gold-heads: {path}: {len(sentences)} sentences for the "
                         f"{len(trees)} trees of --treebank; expected one a tree, in order")
    for tree, sentence in zip(trees, sentences):
        clean = clean_tree(tree)
        words = clean.leaves() if clean is not None else []
        if [_unescaped(w) for w in sentence.words] != [_unescaped(w) for w in words]:
            raise InputError(f"--gold-heads: {sentence.source}: the words "
                             f"{' '.join(sentence.words)[:60]!r} are not its tree's "
                             f"{' '.join(words)[:60]!r} (traces left out)")
    return [(s.words, list(s.heads or ())) for s in sentences]
