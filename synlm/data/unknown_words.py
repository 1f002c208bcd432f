"""Berkeley-style unknown-word classes: a rare or unseen word becomes a signature of its shape
(``UNK-LC-ed``, ``UNK-INITC``, ``UNK-NUM``), in the form Dyer et al. 2016 (RNNG
``get_oracle.py``) took from the Berkeley parser. ``PTBSepsent`` gives its training singletons
these classes; ``SynLMDataModule(unknown_words="classes")`` gives them to any corpus of raw words.

``berkeley_rule`` is the simpler form rnng-pytorch's ``--unkmethod berkeleyrule`` uses
(``<unk>``, ``<cunks>``, ``<unkn>``, ...), for ``Vocab(unknown_words="berkeleyrule")``;
``berkeley_rule2`` the full one its ``--unkmethod berkeleyrule2`` uses, for
``Vocab(unknown_words="berkeleyrule2")`` (``RNNG_PYTORCH_RULES``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container

#: The suffixes a signature may end with (the first that fits), after ``-s``.
SUFFIXES = ("ed", "ing", "ion", "er", "est", "ly", "ity", "y", "al")

_SIGNATURE = r"UNK(-INITC{}|-CAPS|-LC)?(-NUM)?(-DASH)?" + rf"(-(s|{'|'.join(SUFFIXES)}))?"
#: Every string ``unkify`` returns, and nothing else.
SIGNATURE = re.compile(_SIGNATURE.format("(-KNOWNLC)?"))
#: Every string ``berkeley_rule2`` returns (``SIGNATURE`` without ``-KNOWNLC``).
BERKELEY_RULE2 = re.compile(_SIGNATURE.format(""))


def unkify(word: str, known: Container[str]) -> str:
    """Dyer et al. 2016 (RNNG ``get_oracle.py``) unknown-word class of a word not in ``known``:
    ``UNK`` + capitalisation (-INITC[-KNOWNLC], -CAPS, -LC), -NUM, -DASH and a suffix.
    Capitals and lower case are counted among letters, as ``get_oracle.py`` counts them (a
    Roman numeral ``Ⅻ`` is upper case to ``str.isupper`` but no letter). A word in ``known``
    is returned as it is."""
    if word in known:
        return word
    letters = [c for c in word if c.isalpha()]
    caps = sum(c.isupper() for c in letters)
    digit, dash, lower_ch = (any(c.isdigit() for c in word), "-" in word,
                             any(c.islower() for c in letters))
    lower, out = word.lower(), "UNK"
    if word[0].isupper():
        out += ("-INITC" + ("-KNOWNLC" if lower in known else "")) if caps == 1 else "-CAPS"
    elif not word[0].isalpha() and caps > 0:
        out += "-CAPS"
    elif lower_ch:
        out += "-LC"
    out += "-NUM" * digit + "-DASH" * dash
    if lower[-1] == "s" and len(lower) >= 3:
        if lower[-2] not in "siu":
            out += "-s"
    elif len(lower) >= 5 and not dash and not (digit and caps > 0):
        for suffix in SUFFIXES:
            if lower.endswith(suffix):
                out += "-" + suffix
                break
    return out


def is_signature(word: str) -> bool:
    """Whether ``word`` has the form of an unknown-word class (``SIGNATURE``)."""
    return SIGNATURE.fullmatch(word) is not None


def word_class(word: str, known: Container[str]) -> str:
    """``word`` if ``known`` or already a class (the text of a corpus that made its own, as
    ``PTBSepsent``), else its class (``unkify``)."""
    return word if word in known or is_signature(word) else unkify(word, known)


#: Every string ``berkeley_rule`` returns, and nothing else.
BERKELEY_RULE = re.compile(r"<(c?unk(n|ing|ed|ly|s|est|ER|ion|ory|al|-|\.)?|ununk)>")


def berkeley_rule(word: str) -> str:
    """rnng-pytorch's ``berkeley_unk_conv`` (utils.py, "a simplified version of unknown token
    conversion in BerkeleyParser"): ``<unk>``, ``c`` before it for a capital first letter,
    then the first that fits of: ``n`` (first and last characters digits), nothing (at most
    3 characters), the suffixes ``ing``, ``ed``, ``ly``, ``s``, ``est``, ``ER`` (for ``er``),
    ``ion``, ``ory``, an ``un`` prefix (``<ununk>``), ``al``, else the first ``-`` or ``.``
    before the last character."""
    uk, last = "unk", len(word) - 1
    if word[0].isupper():
        uk = "c" + uk
    if word[0].isdigit() and word[last].isdigit():
        return f"<{uk}n>"
    if last <= 2:
        return f"<{uk}>"
    for suffix, mark in (("ing", "ing"), ("ed", "ed"), ("ly", "ly"), ("s", "s"),
                         ("est", "est"), ("er", "ER"), ("ion", "ion"), ("ory", "ory")):
        if word.endswith(suffix):
            return f"<{uk}{mark}>"
    if word.startswith("un"):
        return f"<un{uk}>"
    if word.endswith("al"):
        return f"<{uk}al>"
    mark = next((c for c in word[:last] if c in "-."), "")
    return f"<{uk}{mark}>"


def berkeley_rule2(word: str) -> str:
    """rnng-pytorch's ``berkeley_unk_conv2`` (utils.py, "the full version" of
    ``berkeley_unk_conv``, for ``--unkmethod berkeleyrule2``): Dyer et al. 2016's class
    (``unkify``) of the word, trailing whitespace stripped, with no vocabulary to look its
    lower-cased form up in, so never ``-KNOWNLC`` (the released function leaves it out)."""
    return unkify(word.rstrip(), ())


#: rnng-pytorch's rules by their ``--unkmethod``: the rule, and a pattern matching every class
#: it returns and nothing else.
RNNG_PYTORCH_RULES: dict[str, tuple[Callable[[str], str], re.Pattern[str]]] = {
    "berkeleyrule": (berkeley_rule, BERKELEY_RULE),
    "berkeleyrule2": (berkeley_rule2, BERKELEY_RULE2),
}
