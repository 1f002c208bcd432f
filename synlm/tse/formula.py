"""SyntaxGym prediction formulas: tokenizer, recursive-descent parser, typed AST, evaluation.

A SyntaxGym suite (Hu, Gauthier, Qian, Wilcox & Levy 2020) states what a model should
predict as formulas over region surprisals, e.g.
``[(7;%match_sing%) < (7;%mismatch_sing%)] & [(7;%match_plural%) < (7;%mismatch_plural%)]``.
The language is the one of the reference implementation (``cpllab/syntaxgym-core``,
``syntaxgym/prediction.py``):

- a term ``(R;%COND%)`` is the surprisal of region ``R`` of condition ``COND``, ``R`` a region
  number or ``*`` (the sum over every region of the condition); numbers are literals;
- ``+`` and ``-`` bind tighter than the comparisons ``<``, ``>`` and ``=``, which bind tighter
  than ``&`` (and) and ``|`` (or); every level is left-associative; ``[...]`` and ``(...)``
  group;
- ``=`` is ``numpy.isclose(a, b, rtol=1e-5, atol=1e-3)``: ``|a - b| <= atol + rtol * |b|``;
  ``<`` and ``>`` are strict, so a tie satisfies neither.

The parser is typed: ``+``/``-`` join values, comparisons join values into tests, ``&``/``|``
join tests, and a formula is a test. The levels are the reference's: its pyparsing grammar
(``infixNotation`` over ``oneOf("- +")``, ``oneOf("< > =")``, ``oneOf("& |")``, each
``opAssoc.LEFT``) puts ``+`` and ``-`` on one left-associative level, so ``a - b + c`` reads
``(a - b) + c`` in both.

The older ``relation`` form of a prediction (``{"relation": "greaterthan", "region_number": 3,
"l_operand": "that", "r_operand": "what"}``, in ``syntaxgym-core``'s test data) converts into
the same AST.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from synlm.errors import InputError

#: The tolerances of ``=`` (the reference's ``EQUALITY_RTOL`` and ``EQUALITY_ATOL``).
EQUALITY_RTOL = 1e-5
EQUALITY_ATOL = 1e-3

Region = int | Literal["*"]
#: ``surprisal(region, condition)``: the surprisal of a region (``*``: all regions summed).
SurprisalOf = Callable[[Region, str], float]


class FormulaError(InputError):
    """A malformed prediction; the one-line message names the suite, the prediction index
    (``predictions[i]`` in the suite file), the column (1-based) and what was expected."""

    def __init__(self, suite: str, index: int, column: int | None, message: str) -> None:
        where = f"{suite}: predictions[{index}]"
        if column is not None:
            where += f", column {column}"
        super().__init__(f"{where}: {message}")
        self.suite, self.index, self.column = suite, index, column


# ---------------------------------------------------------------------------------- AST


@dataclass(frozen=True)
class Term:
    """``(region;%condition%)``: a region's surprisal in a condition."""

    region: Region
    condition: str


@dataclass(frozen=True)
class Number:
    """A literal."""

    value: float


@dataclass(frozen=True)
class Arith:
    """``left + right`` or ``left - right`` over values."""

    op: Literal["+", "-"]
    left: Value
    right: Value


@dataclass(frozen=True)
class Compare:
    """``left < right``, ``left > right`` or ``left = right`` (approximately) over values."""

    op: Literal["<", ">", "="]
    left: Value
    right: Value


@dataclass(frozen=True)
class Logic:
    """``left & right`` or ``left | right`` over tests."""

    op: Literal["&", "|"]
    left: Test
    right: Test


Value = Term | Number | Arith
Test = Compare | Logic
Expr = Value | Test

_ARITH = ("+", "-")
_COMPARE = ("<", ">", "=")
_LOGIC = ("&", "|")
_CLOSING = {"[": "]", "(": ")"}


def _digit(char: str) -> bool:
    return char.isascii() and char.isdigit()


def is_test(node: Expr) -> bool:
    """Whether ``node`` has a truth value (a comparison or a conjunction/disjunction)."""
    return isinstance(node, (Compare, Logic))


# ---------------------------------------------------------------------------- tokenizer


@dataclass(frozen=True)
class Token:
    """A lexeme: ``kind`` is ``term``, ``number``, ``op``, ``open``, ``close`` or ``end``;
    ``column`` is 1-based."""

    kind: str
    text: str
    column: int
    value: Term | float | None = None


class _Lexer:
    """Splits a formula into tokens; ``(`` opens a term when a region number or ``*`` and then
    ``;`` follow it, a group otherwise."""

    def __init__(self, text: str, fail: Callable[[int, str], FormulaError]) -> None:
        self.text, self.fail, self.pos = text, fail, 0

    def tokens(self) -> list[Token]:
        out = []
        while (token := self.next()).kind != "end":
            out.append(token)
        out.append(token)
        return out

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def found(self) -> str:
        return repr(self.peek()) if self.peek() else "the end"

    def next(self) -> Token:
        self.skip_space()
        start, char = self.pos, self.peek()
        if not char:
            return Token("end", "", start + 1)
        if char == "(" and self.opens_term():
            return self.term()
        if _digit(char) or char == ".":
            return self.number()
        if char in "[(":
            kind = "open"
        elif char in "])":
            kind = "close"
        elif char in _ARITH + _COMPARE + _LOGIC:
            kind = "op"
        else:
            raise self.fail(start + 1, f"expected a term, a number, an operator or a bracket, "
                                       f"found {char!r}")
        self.pos += 1
        return Token(kind, char, start + 1)

    def opens_term(self) -> bool:
        """Whether the ``(`` at ``pos`` starts ``(R;``: digits or ``*``, then ``;``."""
        i = self.pos + 1
        while i < len(self.text) and self.text[i].isspace():
            i += 1
        if i < len(self.text) and self.text[i] == "*":
            return True
        j = i
        while j < len(self.text) and _digit(self.text[j]):
            j += 1
        while j < len(self.text) and self.text[j].isspace():
            j += 1
        return j > i and j < len(self.text) and self.text[j] == ";"

    def expect(self, char: str, what: str) -> None:
        self.skip_space()
        if self.peek() != char:
            raise self.fail(self.pos + 1, f"expected {what}, found {self.found()}")
        self.pos += 1

    def term(self) -> Token:
        start = self.pos
        self.pos += 1  # "("
        self.skip_space()
        region: Region
        if self.peek() == "*":
            region = "*"
            self.pos += 1
        else:
            digits = self.pos
            while _digit(self.peek()):
                self.pos += 1
            region = int(self.text[digits:self.pos])
        self.expect(";", "';' after the region")
        self.expect("%", "'%' before the condition name")
        name_start = self.pos
        while self.peek() and (self.peek().isalnum() or self.peek() in "_-"):
            self.pos += 1
        if self.pos == name_start:
            raise self.fail(self.pos + 1, f"expected a condition name (letters, digits, '_', "
                                          f"'-'), found {self.found()}")
        condition = self.text[name_start:self.pos]
        if self.peek() != "%":
            raise self.fail(self.pos + 1, f"expected '%' after the condition name, "
                                          f"found {self.found()}")
        self.pos += 1
        self.expect(")", "')' closing the term")
        return Token("term", self.text[start:self.pos], start + 1, Term(region, condition))

    def number(self) -> Token:
        start = self.pos
        while (char := self.peek()) and (_digit(char) or char in ".eE" or (
                char in "+-" and self.text[self.pos - 1] in "eE")):
            self.pos += 1
        text = self.text[start:self.pos]
        try:
            value = float(text)
        except ValueError:
            raise self.fail(start + 1, f"expected a number, found {text!r}") from None
        return Token("number", text, start + 1, value)


# ------------------------------------------------------------------------------- parser


class _Parser:
    """Recursive descent over the three binary levels, each a left-associative loop::

        formula := logic END
        logic   := compare (('&' | '|') compare)*
        compare := sum (('<' | '>' | '=') sum)*
        sum     := atom (('+' | '-') atom)*
        atom    := TERM | ['-'] NUMBER | '[' logic ']' | '(' logic ')'

    Types are checked as nodes are built: values under ``+``/``-`` and comparisons, tests
    under ``&``/``|``.
    """

    def __init__(self, tokens: list[Token], fail: Callable[[int, str], FormulaError]) -> None:
        self.tokens, self.fail, self.i = tokens, fail, 0

    @property
    def current(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def describe(self, token: Token) -> str:
        return "the end" if token.kind == "end" else repr(token.text)

    def formula(self) -> Expr:
        column = self.current.column
        node = self.logic()
        if self.current.kind != "end":
            raise self.fail(self.current.column, f"expected an operator or the end, "
                                                 f"found {self.describe(self.current)}")
        if not is_test(node):
            raise self.fail(column, "expected a comparison ('<', '>' or '='), found a value "
                                    "with no truth to it")
        return node

    def binary(self, ops: tuple[str, ...], operand: Callable[[], Expr], want_test: bool,
               build: Callable[[str, Expr, Expr], Expr]) -> Expr:
        start = self.current.column
        left = operand()
        while self.current.kind == "op" and self.current.text in ops:
            op = self.advance()
            self.check(left, want_test, op, start)
            right_start = self.current.column
            right = operand()
            self.check(right, want_test, op, right_start)
            left = build(op.text, left, right)
        return left

    def check(self, node: Expr, want_test: bool, op: Token, column: int) -> None:
        if is_test(node) != want_test:
            want = "a comparison" if want_test else "a value"
            got = "a value" if want_test else "a comparison"
            raise self.fail(column, f"expected {want} as an operand of {op.text!r} "
                                    f"(column {op.column}), found {got}")

    def logic(self) -> Expr:
        return self.binary(_LOGIC, self.compare, True, Logic)

    def compare(self) -> Expr:
        return self.binary(_COMPARE, self.sum, False, Compare)

    def sum(self) -> Expr:
        return self.binary(_ARITH, self.atom, False, Arith)

    def atom(self) -> Expr:
        token = self.advance()
        if token.kind == "term":
            return token.value
        if token.kind == "number":
            return Number(token.value)
        if token.kind == "op" and token.text == "-" and self.current.kind == "number":
            return Number(-self.advance().value)
        if token.kind == "open":
            node = self.logic()
            closing = self.advance()
            if closing.text != _CLOSING[token.text]:
                raise self.fail(closing.column, f"expected {_CLOSING[token.text]!r} closing "
                                                f"the {token.text!r} of column {token.column}, "
                                                f"found {self.describe(closing)}")
            return node
        raise self.fail(token.column, f"expected a term '(R;%COND%)', a number or an opening "
                                      f"bracket, found {self.describe(token)}")


def parse(text: str, suite: str = "<formula>", index: int = 0) -> Expr:
    """Parse a formula into its AST; a malformed one raises ``FormulaError`` naming ``suite``,
    prediction ``index``, the column and what was expected."""

    def fail(column: int, message: str) -> FormulaError:
        return FormulaError(suite, index, column, message)

    return _Parser(_Lexer(text, fail).tokens(), fail).formula()


_RELATIONS = {"greaterthan": ">", "lessthan": "<", "equals": "="}


def from_relation(spec: Mapping[str, object], suite: str = "<formula>", index: int = 0) -> Expr:
    """The older ``relation`` form (``l_operand`` and ``r_operand`` are conditions compared at
    ``region_number``) as a comparison of two terms."""
    missing = [key for key in ("relation", "region_number", "l_operand", "r_operand")
               if key not in spec]
    if missing:
        raise FormulaError(suite, index, None, f"relation prediction lacks {missing}")
    op = _RELATIONS.get(str(spec["relation"]))
    if op is None:
        raise FormulaError(suite, index, None, f"expected a relation among "
                                               f"{sorted(_RELATIONS)}, found {spec['relation']!r}")
    region = spec["region_number"]
    if not isinstance(region, int) or isinstance(region, bool):
        raise FormulaError(suite, index, None, f"expected an integer region_number, "
                                               f"found {region!r}")
    return Compare(op, Term(region, str(spec["l_operand"])),
                   Term(region, str(spec["r_operand"])))


def parse_prediction(spec: object, suite: str = "<formula>", index: int = 0) -> Expr:
    """A suite's ``predictions[index]``: ``{"type": "formula", "formula": ...}`` or the
    ``relation`` form."""
    if not isinstance(spec, Mapping):
        raise FormulaError(suite, index, None, f"expected an object, found {spec!r}")
    if "relation" in spec:
        return from_relation(spec, suite, index)
    if spec.get("type") != "formula" or not isinstance(spec.get("formula"), str):
        raise FormulaError(suite, index, None, "expected {\"type\": \"formula\", \"formula\": "
                                               "\"...\"} or a relation")
    return parse(spec["formula"], suite, index)


# --------------------------------------------------------------------------- evaluation


def isclose(a: float, b: float) -> bool:
    """``numpy.isclose(a, b, rtol=1e-5, atol=1e-3)``: ``|a - b| <= atol + rtol * |b|``."""
    return abs(a - b) <= EQUALITY_ATOL + EQUALITY_RTOL * abs(b)


def evaluate(node: Expr, surprisal: SurprisalOf) -> float | bool:
    """The value of a value node, the truth of a test node."""
    if isinstance(node, Term):
        return surprisal(node.region, node.condition)
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Arith):
        left, right = evaluate(node.left, surprisal), evaluate(node.right, surprisal)
        return left + right if node.op == "+" else left - right
    if isinstance(node, Compare):
        left, right = evaluate(node.left, surprisal), evaluate(node.right, surprisal)
        if node.op == "<":
            return left < right
        return left > right if node.op == ">" else isclose(left, right)
    left_true = bool(evaluate(node.left, surprisal))
    if node.op == "&":
        return left_true and bool(evaluate(node.right, surprisal))
    return left_true or bool(evaluate(node.right, surprisal))


def referenced(node: Expr) -> frozenset[tuple[Region, str]]:
    """The ``(region, condition)`` pairs a formula reads (``*`` as itself)."""
    if isinstance(node, Term):
        return frozenset({(node.region, node.condition)})
    if isinstance(node, Number):
        return frozenset()
    return referenced(node.left) | referenced(node.right)


def to_text(node: Expr) -> str:
    """The formula written back, every binary node bracketed (``parse(to_text(x)) == x``)."""
    if isinstance(node, Term):
        return f"({node.region};%{node.condition}%)"
    if isinstance(node, Number):
        return repr(node.value)
    return f"[{to_text(node.left)} {node.op} {to_text(node.right)}]"
