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
targets') is the other choice (88.11% of the words). Light: no torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from nltk import Tree

from synlm.syntax.heads import COLLINS_RULES, HeadRules, tree_to_heads
from synlm.syntax.protocols import PROTOCOLS
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


def evaluation_heads(tree: Tree, rules: str = "yamada",
                     keep_tags: frozenset[str] = WORD_TAGS) -> tuple[list[str], list[int]]:
    """The words of ``tree`` whose tags ``keep_tags`` holds (those of ``evaluation_tree``,
    in order) and their gold heads: ``tree_heads`` over the whole tree, then ``kept_heads``."""
    words, tags, heads = tree_heads(tree, rules)
    keep = [tag in keep_tags for tag in tags]
    return [w for w, k in zip(words, keep) if k], kept_heads(heads, keep)


def evaluation_dependencies(trees: Sequence[Tree], protocol: str = "onlstm",
                            rules: str = "yamada", max_length: int | None = None
                            ) -> tuple[list[list[str]], list[list[int]]]:
    """The words and gold heads (``evaluation_heads`` over ``protocol``'s word tags) of the
    trees whose word count ``protocol`` keeps and that have at most ``max_length`` words."""
    p = PROTOCOLS[protocol]
    longest = min(n for n in (p.max_length, max_length, float("inf")) if n)
    words, heads = [], []
    for tree in trees:
        w, h = evaluation_heads(tree, rules, p.keep_tags)
        if max(p.min_length, 1) <= len(w) <= longest:
            words.append(w)
            heads.append(h)
    return words, heads
