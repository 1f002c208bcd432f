"""The label of each model a command scores (``--label``), the name of its column in a
table: given, one a model in command-line order, or by default the model's own name:

- a run folder's name (``runs/awd`` -> ``awd``; its ``version_N`` and ``checkpoints``
  folders and a checkpoint file in them name their run: ``runs/awd/version_0/checkpoints/
  last.ckpt`` -> ``awd``), a checkpoint file elsewhere by its stem (``a.ckpt`` -> ``a``);
- a Hugging Face model by its folder's or hub name's last part (``models/gpt2`` -> ``gpt2``,
  ``EleutherAI/pythia-70m`` -> ``pythia-70m``).

Two models with the same default are told apart by their parent folders (``x/awd``,
``y/awd``), the same path twice by a number (``awd``, ``awd (2)``). A label given to several
models makes them the seeds of one model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePath

#: Folders of a run that name no model: a Lightning version and its checkpoints.
_RUN_PARTS = re.compile(r"checkpoints|version_\d+")
#: At most this many trailing folders tell two defaults apart (never a full path).
_MAX_DEPTH = 3


def _named_parts(source: str) -> tuple[str, ...]:
    """The parts of ``source`` up to the folder that names the model (a run folder, a
    model folder, a hub name); a checkpoint file outside a run, with its stem last."""
    path = PurePath(source)
    parts = path.parts
    if path.suffix == ".ckpt":
        parts = parts[:-1]
    end = len(parts)
    while end and _RUN_PARTS.fullmatch(parts[end - 1]):
        end -= 1
    if path.suffix == ".ckpt" and end == len(parts):  # a file in no run folder
        return (*parts, path.stem)
    return parts[:end] or parts


def default_labels(sources: Sequence[str]) -> list[str]:
    """Each source's default label: its own name, with as many parent folders as tell it
    apart from another source's (at most ``_MAX_DEPTH``), then a number."""
    parts = [_named_parts(source) for source in sources]
    labels = [part[-1] if part else source for part, source in zip(parts, sources)]
    for depth in range(2, _MAX_DEPTH + 1):
        owners: dict[str, set[tuple[str, ...]]] = {}
        for label, part in zip(labels, parts):
            owners.setdefault(label, set()).add(part)
        repeated = {label for label, found in owners.items() if len(found) > 1}
        labels = ["/".join(part[-depth:]) if label in repeated else label
                  for label, part in zip(labels, parts)]
    seen: dict[str, int] = {}
    numbered = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        numbered.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return numbered


def label_problem(labels: Sequence[str] | None, sources: Sequence[str],
                  flags: str) -> str | None:
    """The one-line error for ``--label`` values that do not name ``sources`` (given with
    ``flags``) one a model, if any."""
    if labels is None:
        return None
    if len(labels) != len(sources):
        return (f"--label: {len(labels)} labels for {len(sources)} models ({flags}); give one "
                "label a model, in command-line order (the same label twice: seeds of one "
                "model)")
    empty = next((k for k, label in enumerate(labels, 1) if not label.strip()), None)
    if empty is not None:
        return f"--label: label {empty} is empty; name each model"
    return None
