"""`interp eval`: adjusted evaluation loss of models and baselines, with the paper's Table 1 beside it.

Views: `table` (one number per predictor on the prior), `profile` (adjusted loss at each fixed σ from 0 to
σ_max + 1) and `layers` (the prediction after K = 0..L layers of each model, on the prior and per σ).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from interp.cli import ArgError, check_output, existing_path, noise_spec, note_training, positive_int
from interp.cli.flags import alias
from interp.limits import MAX_BATCH_ELEMENTS, MAX_D, MAX_N, MAX_SIGMA

if TYPE_CHECKING:
    from interp.config import Matrix
    from interp.run import ResolvedModel

BASELINES = ("ols", "constrr", "adarr", "tunedrr", "gd", "bayes")
MAX_SIGMAS = 1_000


HELP = "adjusted evaluation loss of models and baselines"  # listed by `interp --help`


def add(sub) -> None:
    p = sub.add_parser(
        "eval",
        help=HELP,
        description=(
            "Adjusted evaluation loss (½·MSE minus the oracle ridge's ½·MSE on the same sequences, "
            "README, Conventions: adjusted loss) of "
            "each model next to OLS, ConstRR, AdaRR, TunedRR, GD-k and the Bayes floor, with the paper's Table 1 value "
            "where one exists. MODEL is a checkpoint file or a run directory (its last checkpoint). Models are "
            "evaluated on the noise prior, d and n they were trained on (--noise and --n override them; models trained "
            "on different ones are refused) and a run trained on x ~ N(0, Λ) (interp train --x-cov) on inputs from "
            "N(0, Λ), the baselines tuned there; a run trained with --quad c on its own task, labels + c·(x(1)² − 1) "
            "(the oracle the linear ridge on those labels; no paper value)."
        ),
    )
    p.add_argument("models", nargs="*", type=existing_path, metavar="MODEL", help="checkpoint files or run directories")
    p.add_argument(
        "--noise",
        type=noise_spec,
        help="noise prior of the evaluation tasks (default: the models' training prior, else uniform:5)",
    )
    p.add_argument(
        "--view",
        choices=["table", "profile", "layers"],
        default="table",
        help="table: one number per predictor (default); profile: per fixed σ; layers: after every layer",
    )
    p.add_argument(
        "--eval-seq",
        type=positive_int("--eval-seq"),
        default=100_000,
        help="sequences on the prior: the table view, and the layers view's prior column (default 100000)",
    )
    alias(p, "--n-seq", "eval_seq", positive_int("--n-seq"))
    p.add_argument(
        "--profile-seq",
        type=positive_int("--profile-seq"),
        default=10_000,
        help="sequences per σ in the profile and layers views (default 10000)",
    )
    p.add_argument(
        "--sigmas",
        type=_sigmas,
        metavar="LIST|A:B:STEP",
        help="evaluation σ's, e.g. 0,1,3 or 0:6:0.5 (default 0 to σ_max + 1 in steps of 0.5)",
    )
    p.add_argument(
        "--eval-seed",
        type=int,
        default=0,
        help="seed of the evaluation sequences (default 0, as interp table and interp report; same seed, same numbers)",
    )
    alias(p, "--seed", "eval_seed", int)
    p.add_argument("--chunk", type=positive_int("--chunk"), default=10_000, help="sequences per forward pass (memory)")
    p.add_argument("--d", type=positive_int("--d", MAX_D), help="task dimension d (default: the models' d, else 10)")
    p.add_argument(
        "--n", type=positive_int("--n", MAX_N), help="context length n (default: the models' training n, else 20)"
    )
    p.add_argument(
        "--baselines",
        type=_baseline_list,
        default=list(BASELINES),
        metavar="LIST",
        help=f"comma-separated subset of {','.join(BASELINES)} (default all; gd = GD-k for k in --gd-steps)",
    )
    p.add_argument("--no-baselines", action="store_true", help="models only")
    p.add_argument(
        "--gd-steps",
        type=positive_int("--gd-steps", 1_000),
        nargs="+",
        metavar="K",
        help="steps of the GD-k baselines (default: the models' layer counts, else 1)",
    )
    p.add_argument(
        "--csv", nargs="?", const="-", metavar="PATH", help="write rows as CSV to PATH (stdout without PATH)"
    )
    p.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="write results as JSON to PATH (stdout without PATH)"
    )
    p.add_argument("--threads", type=positive_int("--threads", 1024), default=1, help="torch CPU threads (default 1)")
    p.set_defaults(func=cmd_eval)


def _sigmas(text: str) -> list[float]:
    try:
        if ":" in text:
            a, b, step = (float(v) for v in text.split(":"))
            if not (0 < step < float("inf") and a <= b < float("inf")):
                raise ValueError
            span = (b - a) / step  # may overflow to inf: checked before it becomes a count
            if not span < MAX_SIGMAS:
                raise argparse.ArgumentTypeError(f"--sigmas {text!r} makes more than {MAX_SIGMAS} values")
            count = int(span + 1e-9)
            if count >= MAX_SIGMAS:
                raise argparse.ArgumentTypeError(f"--sigmas {text!r} makes {count + 1} values, more than {MAX_SIGMAS}")
            values = [round(a + i * step, 10) for i in range(count + 1)]
        else:
            values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--sigmas must be a list like 0,1,3 or A:B:STEP with STEP > 0, got {text!r}"
        ) from None
    if len(values) > MAX_SIGMAS:
        raise argparse.ArgumentTypeError(f"--sigmas: {len(values)} values, more than {MAX_SIGMAS}")
    if any(not (0 <= v <= MAX_SIGMA) for v in values):
        raise argparse.ArgumentTypeError(f"--sigmas must be between 0 and {MAX_SIGMA:g}, got {text!r}")
    return values


def _baseline_list(text: str) -> list[str]:
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [nm for nm in names if nm not in BASELINES]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"--baselines: unknown {', '.join(bad) or 'empty list'} (choose from {','.join(BASELINES)})"
        )
    return names


def _setting(models: list[ResolvedModel], paths: list[str], args) -> tuple[str, int, int]:
    """(noise, d, n) of the evaluation: each flag given, else the one the models were trained on (a model that does
    not know its own, a loose checkpoint's n, takes any), else uniform:5, 10, 20. One evaluation draws one set of
    sequences, so models trained on different ones are refused, naming them and the flag that evaluates them on one."""
    from interp.tasks import as_prior

    if args.d is not None:
        for m, path in zip(models, paths):
            if m.d != args.d:
                raise ArgError(f"{path}: checkpoint has d={m.d} but the task has d={args.d} (--d)")
    d = args.d or _agreed(models, paths, "d", lambda m: m.d, "a model runs only on its own d: evaluate them separately")
    noise = args.noise or _agreed(
        models,
        paths,
        "noise",
        lambda m: m.noise and as_prior(m.noise),
        "pass --noise to evaluate them all on one, or evaluate them separately",
    )
    n = args.n or _agreed(
        models, paths, "n", lambda m: m.n, "pass --n to evaluate them all at one n, or evaluate them separately"
    )
    return noise or "uniform:5", d or 10, n or 20


def _agreed(models: list[ResolvedModel], paths: list[str], field: str, key, fix: str):
    """The models' `field` when every model that knows it (key(model) is not None) has the same key; None when none
    knows it. Models that differ are an ArgError naming each of them, then `fix`."""
    first: dict = {}  # key -> (path, value) of the first model with it
    for m, path in zip(models, paths):
        k = key(m)
        if k is not None:
            first.setdefault(k, (path, getattr(m, field)))
    if len(first) > 1:
        what = (lambda v: v) if field == "noise" else (lambda v: f"{field}={v}")
        raise ArgError(
            "MODEL: " + ", ".join(f"{path} is trained on {what(v)}" for path, v in first.values()) + f"; {fix}"
        )
    return next(iter(first.values()), (None, None))[1]


def _one_setting(models: list[ResolvedModel], paths: list[str], setting, describe):
    """The value of `setting(model)` every model shares: one evaluation draws one set of sequences, so models trained
    on different ones are refused, each named with `describe(value)`, what it was trained on."""
    first: dict = {}
    for m, path in zip(models, paths):
        first.setdefault(setting(m), path)
    if len(first) > 1:
        raise ArgError(
            "MODEL: "
            + ", ".join(f"{path} is trained on {describe(v)}" for v, path in first.items())
            + "; evaluate them separately"
        )
    return next(iter(first), None)


def _input_covariance(models: list[ResolvedModel], paths: list[str]) -> Matrix | None:
    """The input covariance Λ (x ~ N(0, Λ)) the models were trained on, None for I (a loose checkpoint file records
    none: I)."""
    from interp.config import describe_covariance

    return _one_setting(models, paths, lambda m: m.x_cov, lambda c: f"x ~ N(0, {describe_covariance(c)})")


def _quadratic_task(models: list[ResolvedModel], paths: list[str]) -> float:
    """c of the quadratic task the models were trained on (TrainConfig.quad; 0: the paper's task, also for a loose
    checkpoint)."""
    quad = _one_setting(
        models,
        paths,
        lambda m: 0.0 if m.config is None else m.config.quad,
        lambda c: f"the quadratic task (--quad {c:g})" if c else "the paper's task",
    )
    return quad or 0.0


def _note_step(m: ResolvedModel) -> None:
    """Say on stderr which step was read when a run directory's last checkpoint is not its final step."""
    if m.run is None or m.checkpoint == Path(m.path) or m.config is None:
        return
    from interp.presets import resolve

    total = resolve(m.config).steps
    if m.step == total:
        return
    why = "the run is unfinished (interp train --resume RUN goes on)"
    if m.run.has_resume() and m.run.writer() is None:
        from interp import checkpoints as ck

        try:
            at = ck.read_tensors(m.run.resume_path)[1].get("step")
        except ValueError:  # CheckpointError: an unreadable resume state
            at = None
        if at == total:
            why = "its final checkpoint is missing; interp train --resume RUN restores it from the resume state"
    print(
        f"interp eval: note: {m.path}: read the checkpoint of step {m.step}, not the run's last step {total}: {why}",
        file=sys.stderr,
    )


def cmd_eval(args) -> int:
    import torch

    from interp.cli.output import STDOUT, csv_text, json_text, write
    from interp.config import describe_covariance, inputs_suffix
    from interp.evalset import EvalSet
    from interp.evaluate import evaluate, paper_value, per_layer_loss, per_layer_profile, sigma_grid, sigma_profile
    from interp.run import resolve_model
    from interp.tuning import baselines as make_baselines
    from interp.tuning import is_cached, parameters, tuned

    torch.set_num_threads(args.threads)
    if args.csv == "-" and args.json == "-":
        raise ArgError("--csv and --json cannot both write to stdout; give one of them a PATH")
    for flag, target in (("--csv", args.csv), ("--json", args.json)):
        if target not in (None, "-"):
            check_output(target, flag, args.models)
    files = [os.path.realpath(t) for t in (args.csv, args.json) if t not in (None, "-")]
    if len(files) == 2 and files[0] == files[1]:
        raise ArgError(f"--csv and --json both name {args.csv}")
    note_training(args.models, "interp eval")
    paths = args.models
    models = [resolve_model(path) for path in paths]  # what each path is: model, step, prior, d, n, Λ
    for m in models:
        _note_step(m)
    quad = _quadratic_task(models, paths)  # a --quad run is scored on its own task: labels + c·(x(1)² − 1)
    noise, d, n = _setting(models, paths, args)  # each model on the prior, d and n it was trained on
    if args.chunk * (n + 1) * (d + 1) > MAX_BATCH_ELEMENTS:
        raise ArgError(
            f"--chunk: {args.chunk} sequences of {n + 1} x {d + 1} tokens exceed "
            f"{MAX_BATCH_ELEMENTS} entries per forward pass; lower --chunk"
        )
    x_cov = _input_covariance(models, paths)
    if n <= d and not args.no_baselines:
        args.baselines = [b for b in args.baselines if b not in ("adarr", "tunedrr")]  # need n > d
    gd_steps = tuple(args.gd_steps or sorted({m.model.cfg.n_layers for m in models}) or (1,))
    names = (
        []
        if args.no_baselines
        else [nm for b in args.baselines for nm in ([f"gd{k}" for k in gd_steps] if b == "gd" else [b])]
    )
    if args.view == "layers" and not models:
        raise ArgError("--view layers: give at least one MODEL")
    if not models and not names:
        raise ArgError("nothing to evaluate: give a MODEL or drop --no-baselines")

    for m in models:  # every check passed: what is not known of a model is said once, before the work
        if m.note:
            print(f"interp eval: note: {m.note}", file=sys.stderr)
    preds, meta = {}, {}
    for m, path in zip(models, paths):
        cfg = m.model.cfg
        label = _label(path, paths)
        preds[label] = m.model
        in_dist = m.noise is not None and _same_prior(m.noise, noise) and m.n in (None, n) and cfg.n_heads == 1
        meta[label] = dict(
            kind="model",
            path=path,
            step=m.step,
            arch=cfg.param,
            family=cfg.family_label,
            layers=cfg.n_layers,
            trained_on=m.noise,
            # Table 1 has the paper's models only: a family variant (qkv, retnet, an FFN, ...) has no paper value
            paper=paper_value(cfg.param, noise, cfg.n_layers, d, n, x_cov)
            if in_dist and cfg.is_lsa and not quad
            else None,
        )
    tuning = None
    if names:
        if not is_cached(noise, d, n, gd_steps, x_cov):
            print(
                f"interp eval: tuning baselines for {noise}{inputs_suffix(x_cov)} (d={d}, n={n}; not in the "
                "shipped cache, about half a minute)",
                file=sys.stderr,
            )
        base = make_baselines(noise, d, n, gd_steps=gd_steps, names=names, x_cov=x_cov)
        rec = tuned(noise, d, n, gd_steps, x_cov)
        tuning = {k: _strip_grid(v) for k, v in rec.items()}
        for nm, fn in base.items():
            preds[nm] = fn
            meta[nm] = dict(
                kind="baseline",
                paper=None if quad else paper_value(nm, noise, None, d, n, x_cov),
                params=parameters(nm, rec),
            )

    sigmas = args.sigmas or sigma_grid(noise)
    rows: list[dict] = []
    common = dict(noise=noise, d=d, n=n, seed=args.eval_seed)
    on_prior = EvalSet(
        noise, d=d, n=n, n_seq=args.eval_seq, seed=args.eval_seed, chunk=args.chunk, x_cov=x_cov, quad=quad
    )
    per_sigma = on_prior.replace(n_seq=args.profile_seq)
    if args.view == "table":
        for nm, est in evaluate(preds, on_prior).items():
            rows.append(dict(view="table", name=nm, sigma=None, layer=None, **est.to_dict(), paper=meta[nm]["paper"]))
    elif args.view == "profile":
        for nm, ests in sigma_profile(preds, sigmas, per_sigma).items():
            rows += [
                dict(view="profile", name=nm, sigma=s, layer=None, **e.to_dict(), paper=None)
                for s, e in zip(sigmas, ests)
            ]
    else:
        for nm, info in meta.items():
            if info["kind"] != "model":
                continue
            model = preds[nm]
            curve = per_layer_loss(model, on_prior)
            grid = per_layer_profile(model, sigmas, per_sigma)
            for k, est in enumerate(curve):
                rows.append(dict(view="layers", name=nm, sigma=None, layer=k, **est.to_dict(), paper=None))
                rows += [
                    dict(view="layers", name=nm, sigma=s, layer=k, **e.to_dict(), paper=None)
                    for s, e in zip(sigmas, grid[k])
                ]

    if args.csv:
        write(args.csv, csv_text(rows, CSV_FIELDS, common | {"x_cov": describe_covariance(x_cov)}))
    if args.json:
        payload = dict(
            **common,
            **({} if x_cov is None else {"x_cov": on_prior.describe()["x_cov"]}),
            **({"quad": quad} if quad else {}),
            view=args.view,
            n_seq=args.eval_seq,
            profile_seq=args.profile_seq,
            sigmas=sigmas if args.view != "table" else None,
            predictors=meta,
            tuning=tuning,
            rows=rows,
        )
        write(args.json, json_text(payload, default=str))
    if STDOUT not in (args.csv, args.json):
        task = noise + inputs_suffix(x_cov) + (f", quadratic task: labels + {quad:g}·(x(1)² − 1)" if quad else "")
        print(_terminal(args.view, rows, meta, task, d, n, args, sigmas))
    return 0


def _label(path: str, all_paths: list[str]) -> str:
    p = Path(path)
    name = p.name if p.is_dir() else f"{p.parent.parent.name}/{p.stem}" if p.parent.name == "checkpoints" else p.name
    return name if sum(Path(q).name == p.name for q in all_paths) <= 1 else str(path)


def _same_prior(a: str, b: str) -> bool:
    from interp.tasks import as_prior

    return as_prior(a) == as_prior(b)


def _strip_grid(v):
    if isinstance(v, dict):
        return {k: _strip_grid(x) for k, x in v.items() if k != "grid"}
    return v


CSV_FIELDS = (
    "view",
    "name",
    "noise",
    "d",
    "n",
    "seed",
    "x_cov",
    "layer",
    "sigma",
    "mean",
    "stderr",
    "n_seq",
    "median",
    "worst",
    "paper",
)


def _what(info: dict) -> str:
    """A predictor in words: a model's architecture (ModelConfig.family_label: "FULL", "delta", "FULL+relu FFN") and
    depth, a baseline's parameters as interp.tuning tunes and prints them (interp table prints the same)."""
    from interp.tuning import format_param

    if info["kind"] == "model":
        return f"{info['family']} L={info['layers']}"
    return ", ".join(f"{k}={format_param(v)}" for k, v in info["params"].items())


def _grid(rows: list[dict]) -> list[str]:
    """mean ± s.e. of each row (a grid's cells; its heading names the sequence count)."""
    from interp.render import loss

    return [loss(r["mean"], r["stderr"]) for r in rows]


def _terminal(view: str, rows: list[dict], meta: dict, noise: str, d: int, n: int, args, sigmas: list[float]) -> str:
    from interp.evaluate import MAX_REL_STDERR, dominated, precise
    from interp.render import count, fixed, loss, ratio, table

    head = f"adjusted evaluation loss on {noise} (d={d}, n={n}, seed={args.eval_seed})"
    if view == "table":
        out, flagged, noisy = [], False, False
        for r in rows:
            info = meta[r["name"]]
            paper = info["paper"]
            flag = dominated(r["mean"], r["worst"], r["n_seq"])
            supported = precise(r["mean"], r["stderr"])
            flagged |= flag
            noisy |= bool(paper) and not supported
            cell = loss(r["mean"], r["stderr"], r["n_seq"]) + (" ⚠" if flag else "")
            out.append([r["name"], _what(info), cell, fixed(paper), ratio(r["mean"], r["stderr"], paper, supported)])
        notes = [
            "paper: Table 1 of Vladymyrov et al. 2024 where the cell exists (models: only on their training prior)."
        ]
        if args.eval_seed == 0 and args.eval_seq == 100_000:
            notes.append("The same sequences as interp table's and interp report's (seed 0, 100 000 of the prior).")
        if noisy:
            notes.append(
                f"○: standard error above {MAX_REL_STDERR:.0%} of the value, too noisy for a ratio to the paper; "
                "evaluate on more sequences (--eval-seq)."
            )
        if flagged:
            notes.append(
                "⚠: one sequence carries more than half of the mean (a blown-up prediction); see --json for "
                "the median and the worst sequence."
            )
        return (
            f"{head}, {count(args.eval_seq)} sequences\n"
            + table(["predictor", "what", "adjusted loss", "paper", "ours/paper"], out, left=2)
            + "\n"
            + "\n".join(notes)
        )
    if view == "profile":
        names = list(dict.fromkeys(r["name"] for r in rows))
        grid = [[nm, *_grid([r for r in rows if r["name"] == nm])] for nm in names]
        return f"{head}: per fixed σ, mean ± s.e. on {count(args.profile_seq)} sequences each\n" + table(
            ["predictor \\ σ", *(f"{s:g}" for s in sigmas)], grid
        )
    parts = []
    for nm in dict.fromkeys(r["name"] for r in rows):
        sub = [r for r in rows if r["name"] == nm]
        L = max(r["layer"] for r in sub)
        grid = [[f"K={k}", *_grid([r for r in sub if r["layer"] == k])] for k in range(L + 1)]
        parts.append(
            f"{nm}: prediction after K of {L} layers, mean ± s.e. ({count(args.eval_seq)} sequences on the prior, "
            f"{count(args.profile_seq)} per σ)\n" + table(["layers", "prior", *(f"σ={s:g}" for s in sigmas)], grid)
        )
    return head + "\n\n" + "\n\n".join(parts)
