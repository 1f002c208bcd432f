"""A test helper: which region of a SyntaxGym sentence each of an external model's tokens
belongs to, walking the tokens along the regions' text as syntaxgym-core's runner does
(``agg_surprisals.compute_mapping_heuristic``) for the two models of its own fixtures.

synlm's scorers know each word's region, so the library needs no such walk; the tests use it
to turn the fixtures' token streams into a scorer (``FixtureScorer`` in ``test_syntaxgym``).
"""

from __future__ import annotations

from collections.abc import Sequence


def _characters(region_contents: Sequence[str]) -> tuple[str, list[int]]:
    """The regions' text with whitespace removed, and the region of each character."""
    chars, owners = [], []
    for index, content in enumerate(region_contents):
        text = "".join(content.split())
        chars.append(text)
        owners += [index] * len(text)
    return "".join(chars), owners


def align_tokens(region_contents: Sequence[str], tokens: Sequence[str], unk: str = "<unk>",
                 eos: str = "<eos>") -> list[int]:
    """The region (an index into ``region_contents``) of each of an external model's tokens,
    as the reference implementation (``syntaxgym-core``, ``Sentence.tokenize_regions``)
    assigns them: a token matches the next characters of the regions' text (whitespace
    ignored) and goes to the region of its first character; a run of ``unk`` consumes the
    text up to where the next known token matches (to the end if none follows) and goes to
    the region where the run starts; ``eos`` goes to the last region."""
    stream, owners = _characters(region_contents)
    out: list[int] = []
    pos = i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == eos:
            out.append(len(region_contents) - 1)
            i += 1
            continue
        if pos >= len(stream):
            raise ValueError(f"token {i} {token!r} is past the end of the regions' text")
        if token == unk:
            run = i
            while run < len(tokens) and tokens[run] == unk:
                run += 1
            out += [owners[pos]] * (run - i)
            pos, i = _after_unknown(stream, pos, tokens, run, eos), run
            continue
        text = "".join(token.split())
        if not text or not stream.startswith(text, pos):
            raise ValueError(f"token {i} {token!r} does not match the regions' text at "
                             f"{stream[pos:pos + len(text) + 8]!r}")
        out.append(owners[pos])
        pos += len(text)
        i += 1
    if pos != len(stream):
        raise ValueError(f"the tokens end before the regions' text does: {stream[pos:]!r} left")
    return out


def _after_unknown(stream: str, pos: int, tokens: Sequence[str], next_index: int,
                   eos: str) -> int:
    """Where the text an unknown run covers ends: where ``tokens[next_index]`` next matches
    (at least one character on), or the end when no known token follows."""
    if next_index == len(tokens) or tokens[next_index] == eos:
        return len(stream)
    following = "".join(tokens[next_index].split())
    found = stream.find(following, pos + 1) if following else -1
    if found < 0:
        raise ValueError(f"token {next_index} {tokens[next_index]!r} after an unknown run is "
                         f"not in the rest of the regions' text {stream[pos:]!r}")
    return found
