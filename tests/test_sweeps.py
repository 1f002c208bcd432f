"""wandb sweeps (configs/sweeps/*.yaml): sampled parameters, turned into flags by wandb's own
agent code, parse through the CLI and reach the config; one trial of each runs offline and
logs the sweep's metric to wandb."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest
import wandb
import yaml
from wandb.sdk.launch.sweeps.utils import create_sweep_command_args

from conftest import TINY_OVERRIDES, run_cli
from synlm.catalog import REPO_CONFIGS

SWEEPS = sorted(REPO_CONFIGS.glob("sweeps/*.yaml"))
#: Small sizes every sweep's model accepts (ON-LSTM chunk sizes 5, 10 and 25 divide both).
SMALL = ["--model.backbone.init_args.input_size=50", "--model.backbone.init_args.hidden_size=100"]


def sample(spec: dict[str, Any], rng: random.Random) -> Any:
    """One draw of a sweep parameter, as wandb's sweep controller would."""
    if "values" in spec:
        return rng.choice(spec["values"])
    if spec.get("distribution") == "log_uniform_values":
        return math.exp(rng.uniform(math.log(spec["min"]), math.log(spec["max"])))
    raise ValueError(f"no sampler for {spec}")  # a new kind: add it here


def trial_args(sweep: dict[str, Any], params: dict[str, Any]) -> list[str]:
    """The arguments of ``synlm`` in the agent's command for ``params`` (``${args}``
    expanded by wandb's own function; the config path made absolute)."""
    flags = create_sweep_command_args({"args": {k: {"value": v} for k, v in params.items()}})
    command = []
    for chunk in sweep["command"]:
        if chunk == "${args}":
            command += flags["args"]
        elif chunk != "${env}":
            command.append(chunk)
    assert command[:2] == ["synlm", "fit"], "a sweep trial is `synlm fit ...`"
    return [str(REPO_CONFIGS.parent / c) if c.startswith("configs/") else c
            for c in command[1:]]


def lookup(config: dict[str, Any], dotted: str) -> Any:
    """``a.b.c`` in a printed config; through a list, its last element (what
    ``--model.heads.init_args.x`` sets); an ``init_args`` level the key leaves out (the
    recipe's: ``model.heads`` is ``model.init_args.heads``) is gone through."""
    value: Any = config
    for key in dotted.split("."):
        if isinstance(value, list):
            value = value[-1]
        if key not in value and "init_args" in value:
            value = value["init_args"]
        value = value[key]
    return value


@pytest.mark.parametrize("path", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_sampled_parameters_parse_and_reach_the_config(
        path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = yaml.safe_load(path.read_text())
    assert sweep["metric"]["name"] == "val/ppl" and sweep["metric"]["goal"] == "minimize"
    rng = random.Random(0)
    for _ in range(4):
        params = {k: sample(v, rng) for k, v in sweep["parameters"].items()}
        assert run_cli([*trial_args(sweep, params), "--print_config"]) == 0
        printed = yaml.safe_load(capsys.readouterr().out)
        for key, value in params.items():
            assert lookup(printed, key) == pytest.approx(value), key


@pytest.mark.parametrize("path", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_one_trial_runs_offline_and_logs_the_metric(path: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    logged: dict[str, Any] = {}
    log = wandb.sdk.wandb_run.Run.log

    def recording(run: Any, data: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        logged.update(data)
        return log(run, data, *args, **kwargs)

    monkeypatch.setattr(wandb.sdk.wandb_run.Run, "log", recording)
    sweep = yaml.safe_load(path.read_text())
    params = {k: sample(v, random.Random(1)) for k, v in sweep["parameters"].items()}
    args = [*trial_args(sweep, params), *TINY_OVERRIDES, *SMALL, "--model.init_from=null",
            "--trainer.max_steps=4", "--trainer.val_check_interval=4",
            "--trainer.limit_val_batches=2", "--trainer.callbacks=[]",
            f"--trainer.logger.init_args.save_dir={tmp_path}",
            f"--trainer.default_root_dir={tmp_path}"]
    assert run_cli(args) == 0
    wandb.finish()
    assert len(list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))) == 1  # offline run
    assert math.isfinite(logged[sweep["metric"]["name"]])
