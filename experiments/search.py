"""Hyper-parameter search on validation data with Ray Tune (ASHA early stopping), for MNIST-Add1 and Add2.

``python -m experiments search --samples 8 --space learning_rate=loguniform:1e-4:1e-2
--space lr_schedule=choice:constant,cosine --seed 100 --out out/search`` trains one split per trial (data
from the tuning ``--seed``; pick seeds you will not report on), scores every epoch on the validation additions
only (the runner's model-selection score), and stops poor trials early with ASHA. No trial runs test inference:
test accuracy cannot influence the choice. It writes ``search.json`` (every trial: its values, best validation
score and epoch, epochs run) and ``search.md`` (the table, best first, and the chosen values), and keeps Tune's
own trial folders under ``tune/``. Any field of :class:`~experiments.mnist_add.runner.Setting` can be
searched (learning rate, schedule, loss, reasoner, epochs, model form...); the others are the runner's
defaults for the size (:func:`~experiments.mnist_add.runner.default_setting`: ``--digits 2
--additions 150`` searches around MNIST-Add2-150's schedule, scored on the validation place sums).

Example:
    >>> parse_space(["learning_rate=loguniform:1e-4:1e-2", "loss=choice:energy,bce"])
    {'learning_rate': ('loguniform', [0.0001, 0.01]), 'loss': ('choice', ['energy', 'bce'])}
    >>> parse_space(["epochs=choice:5,10"])
    {'epochs': ('choice', [5, 10])}
    >>> parse_space(["speed=choice:1"])
    Traceback (most recent call last):
    ...
    ValueError: --space speed: not a setting field; choose from ...
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

from .arguments import DefaultsHelpFormatter, positive_int
from .mnist_add.runner import Setting, default_setting, memory_estimate_mb, validate_split
from .sweep import RUN_CPUS, require_ray, start_ray

__all__ = ["epoch_budget", "main", "parse_space", "search", "trial"]

log = logging.getLogger(__name__)

_KINDS = ("choice", "uniform", "loguniform")


def parse_space(items: list[str]) -> dict[str, tuple[str, list[Any]]]:
    """Parse ``field=kind:values`` items (``choice:a,b,c``, ``uniform:lo:hi``, ``loguniform:lo:hi``)."""
    names = {f.name: f for f in fields(Setting)}
    space: dict[str, tuple[str, list[Any]]] = {}
    for item in items:
        name, _, spec = item.partition("=")
        kind, _, values = spec.partition(":")
        if name not in names:
            raise ValueError(f"--space {name}: not a setting field; choose from {', '.join(names)}")
        if kind not in _KINDS:
            raise ValueError(f"--space {name}: kind {kind!r} is not one of {', '.join(_KINDS)}")
        parts = values.split("," if kind == "choice" else ":")
        if kind != "choice" and len(parts) != 2:
            raise ValueError(f"--space {name}: {kind} needs two bounds, lo:hi")
        space[name] = (kind, [_value(p) for p in parts])
    return space


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


#: Fields that set how many epochs a trial may train (:attr:`Setting.epoch_cap`).
_EPOCH_FIELDS = ("epochs", "patience", "max_epochs")


def epoch_budget(base: Setting, space: dict[str, tuple[str, list[Any]]]) -> int:
    """The most epochs any trial of the search may train: ASHA's ``max_t``, so that no trial is cut short.

    With ``patience`` (the MNIST-Add2-150 default) a trial trains past ``epochs``, up to :attr:`Setting.epoch_cap`;
    a space over ``epochs``, ``patience`` or ``max_epochs`` (``choice`` only) counts its every combination.

    Raises:
        ValueError: A ``uniform``/``loguniform`` space over one of those fields (they are whole epochs).

    Example:
        >>> epoch_budget(default_setting(2, 150), {}), epoch_budget(default_setting(1, 300), {})
        (80, 125)
        >>> epoch_budget(Setting(epochs=10), {"patience": ("choice", [0, 3]), "max_epochs": ("choice", [0, 15])})
        20
    """
    names = [name for name in _EPOCH_FIELDS if name in space]
    for name in names:
        if space[name][0] != "choice":
            raise ValueError(f"--space {name}: epochs are whole numbers; use choice:a,b")
    combinations = itertools.product(*(space[name][1] for name in names))
    return max(replace(base, **dict(zip(names, values))).epoch_cap for values in combinations)


def trial(config: dict[str, Any]) -> None:
    """One Tune trial: train the split with the sampled values and report validation after every epoch."""
    report = _tune_api("report")
    base = Setting(**config["base"])
    setting = replace(base, **config["values"])
    validate_split(
        setting,
        config["split"],
        config["seed"],
        on_epoch=lambda epoch, logs: report({"val_score": 100 * logs["val_score"], "epoch": epoch}),
    )


def _tune_api(name: str) -> Any:
    """``ray.tune.<name>`` (Ray >= 2.41), else the older ``ray.train.<name>`` that Tune used before."""
    from ray import train, tune

    return getattr(tune, name, None) or getattr(train, name)


def search(
    base: Setting,
    space: dict[str, tuple[str, list[Any]]],
    out: Path,
    *,
    samples: int,
    seed: int,
    split: int = 0,
    grace_epochs: int = 5,
    address: str | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Sample ``samples`` trials from ``space`` around ``base``; ASHA stops poor ones; write the choice.

    Returns:
        ``{"chosen": values of the best trial, "trials": [...]}`` (as written to ``search.json``).
    """
    require_ray()
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    budget = epoch_budget(base, space)  # before Ray starts: a bad space is a ValueError here
    started = start_ray(address, workers)
    try:
        values = {  # tune.choice(values), tune.uniform(lo, hi), tune.loguniform(lo, hi)
            name: tune.choice(vals) if kind == "choice" else getattr(tune, kind)(*vals)
            for name, (kind, vals) in space.items()
        }
        config = {"base": asdict(base), "values": values, "split": split, "seed": seed}
        scheduler = ASHAScheduler(max_t=budget, grace_period=min(grace_epochs, budget), time_attr="epoch")
        tuner = tune.Tuner(
            tune.with_resources(trial, {"cpu": RUN_CPUS, "memory": memory_estimate_mb(base) * 2**20}),
            param_space=config,
            tune_config=tune.TuneConfig(metric="val_score", mode="max", scheduler=scheduler, num_samples=samples),
            run_config=_tune_api("RunConfig")(storage_path=str((out / "tune").resolve()), name="search", verbose=0),
        )
        grid = tuner.fit()
    finally:
        if started:
            import ray

            ray.shutdown()
    return _write(out, grid, base, seed, split)


def _write(out: Path, grid: Any, base: Setting, seed: int, split: int) -> dict[str, Any]:
    trials = []
    for result in grid:
        frame = result.metrics_dataframe
        if result.error is not None or frame is None or frame.empty:
            trials.append({"values": result.config["values"], "error": str(result.error or "no epoch reported")})
            continue
        best = frame.loc[frame["val_score"].idxmax()]
        trials.append(
            {
                "values": result.config["values"],
                "val_score": float(best["val_score"]),
                "best_epoch": int(best["epoch"]),
                "epochs_run": len(frame),
            }
        )
    scored = sorted((t for t in trials if "val_score" in t), key=lambda t: -t["val_score"])
    report = {
        "tuning_seed": seed,
        "split": split,
        "base": asdict(base),
        "chosen": scored[0]["values"] if scored else None,
        "trials": scored + [t for t in trials if "error" in t],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "search.json").write_text(json.dumps(report, indent=1))
    lines = [
        f"# Search on validation: {base.name} (tuning seed {seed}, split {split}; test accuracy never computed)",
        "",
        "| values | best validation % | at epoch | epochs run |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {t['values']} | {t['val_score']:.1f} | {t['best_epoch']} | {t['epochs_run']} |" for t in scored]
    lines += [f"| {t['values']} | failed: {t['error'][:80]} | | |" for t in trials if "error" in t]
    lines += ["", f"Chosen: {report['chosen']}"]
    (out / "search.md").write_text("\n".join(lines) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (``python -m experiments search ...``).

    Example:
        >>> main(["--space", "speed=choice:1", "--samples", "1"])
        Traceback (most recent call last):
        ...
        SystemExit: 2
    """
    parser = argparse.ArgumentParser(
        prog="python -m experiments search",
        description="Hyper-parameter search for MNIST-Addition on validation data (Ray Tune, ASHA).",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument(
        "--space", action="append", required=True, help="field=choice:a,b | uniform:lo:hi | loguniform:lo:hi"
    )
    parser.add_argument("--samples", type=positive_int, default=8, help="trials")
    parser.add_argument("--digits", type=int, default=1, choices=(1, 2), help="digits per number (Add1 or Add2)")
    parser.add_argument("--additions", type=positive_int, default=300, help="training additions")
    parser.add_argument(
        "--epochs",
        type=positive_int,
        help="epochs (default: the runner's); ASHA's budget per trial is the most epochs a trial may train, "
        "with the runner's patience (MNIST-Add2-150) up to twice this",
    )
    parser.add_argument("--steps-per-epoch", type=positive_int, help="steps per epoch (default: the runner's)")
    parser.add_argument(
        "--grace-epochs", type=positive_int, help="epochs before ASHA may stop a trial (default: a fifth of the epochs)"
    )
    parser.add_argument("--seed", type=int, default=100, help="tuning seed (do not report results on it)")
    parser.add_argument("--split", type=int, default=0, help="split of the tuning seed each trial trains")
    parser.add_argument("--ray-address", metavar="ADDR", help="an existing Ray cluster (default: a local one)")
    parser.add_argument("--workers", type=positive_int, help="local Ray instance: concurrent trials")
    parser.add_argument("--out", type=Path, default=Path("out/search"), help="results folder")
    args = parser.parse_args(argv)
    base = default_setting(args.digits, args.additions)
    given = {"epochs": args.epochs, "steps_per_epoch": args.steps_per_epoch}
    base = replace(base, **{name: value for name, value in given.items() if value is not None})
    try:
        space = parse_space(args.space)
        epoch_budget(base, space)
    except ValueError as exc:
        parser.error(str(exc))
    if "loss" in space and "labels" not in space and base.labels == "observed":
        base = replace(base, labels="fixed")  # the bilevel losses need the sums as labels: every trial alike
    report = search(
        base,
        space,
        args.out,
        samples=args.samples,
        seed=args.seed,
        split=args.split,
        grace_epochs=args.grace_epochs or max(1, base.epochs // 5),
        address=args.ray_address,
        workers=args.workers,
    )
    print((args.out / "search.md").read_text())
    return 0 if report["chosen"] is not None else 1
