"""A sweep's grid: its runs from option values (every combination of the listed ones, per-run overrides), their
names, and grid files. The options are interp.config's: `interp train`'s flags, by key (`save_every`)."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from interp.config import OPTIONS, TrainConfig, config_from_options
from interp.files import CheckpointError, InvalidArgument, InvalidType, read_regular_file
from interp.limits import MAX_CONFIG_BYTES, MAX_SWEEP_RUNS
from interp.presets import resolve
from interp.tasks import as_prior, prior_slug

NAME_AXES = ("arch", "layers", "noise", "seed")  # always in a run's name, in this order
# The other keys an option goes by in a grid file, as in `interp sweep`'s flags: {"seeds": "seed"}.
ALIASES = {a.removeprefix("--").replace("-", "_"): k for k, o in OPTIONS.items() for a in o.aliases}


class SweepError(InvalidArgument):
    """A sweep that cannot start (conflicting run directory, bad grid file); the message is one line."""


@dataclass
class RunSpec:
    """One run of a sweep: its directory name, its option values and its config (None when they are bad)."""

    name: str
    options: dict[str, Any]
    cfg: TrainConfig | None = None
    error: str | None = None  # a bad setting: the run is reported failed with this and never started


def _value_slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", str(value)).strip("-") or "none"


def _canonical(key: str, value: Any) -> Any:
    if OPTIONS[key].kind == "noise":
        try:
            return as_prior(value).spec
        except ValueError:
            return value
    return value


def _default(key: str) -> Any:
    """The default value of an option (its field's, interp.config.OPTIONS)."""
    return OPTIONS[key].default


def _run_order(order: Any, options: Mapping[str, Any]) -> list[str]:
    """The options named by a grid's `order` (the run order's slowest-varying options first), checked."""
    if isinstance(order, str) or not isinstance(order, (list, tuple)) or not all(isinstance(k, str) for k in order):
        raise SweepError(f"order must be a list of option names, got {order!r:.60}")
    order = [ALIASES.get(k.replace("-", "_"), k.replace("-", "_")) for k in order]
    unknown = [k for k in order if k not in options]
    if unknown or len(set(order)) != len(order):
        what = f"{unknown[0]!r}, which the grid does not set" if unknown else "an option twice"
        raise SweepError(f"order names {what} (it lists the grid's options, slowest-varying first)")
    return order


def expand(options: Mapping[str, Any], overrides: Iterable[Mapping[str, Any]] = ()) -> list[RunSpec]:
    """Every combination of the list-valued options (scalars go to every run), in order seed, prior,
    layers, arch, then the other varied options (`options["order"]`, a list of option names, puts those first:
    ["layers", "seed"] trains every shallow run, of every seed, before any deeper one); each override
    {"where": {...}, option: value, ...} sets options on the runs whose settings match all of `where` (a list in
    `where` matches any of its values), and an override {"where": {...}, "skip": true} leaves those runs out of the
    grid (three seeds at 2 and 4 layers, one at 7; an FFN on one attention only).
    """
    if not isinstance(options, Mapping):
        raise InvalidType(f"options must be a dict of option values, got {type(options).__name__}")
    options = dict(options)
    slowest = _run_order(options.pop("order", []), options)
    options = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in options.items()}
    for key, values in options.items():
        if key not in OPTIONS:
            raise SweepError(f"unknown run option {key!r}")
        if not values:  # every combination of an empty list is no run at all: never a silently empty sweep
            raise SweepError(f"{key}: an empty list of values (give at least one, or leave the option out)")
    total = math.prod(len(v) for v in options.values())
    if total > MAX_SWEEP_RUNS:
        raise SweepError(
            f"the grid has {total} runs, more than the {MAX_SWEEP_RUNS} a sweep may have "
            "(interp.limits.MAX_SWEEP_RUNS); split it into several sweeps"
        )
    swept = [k for k, v in options.items() if k not in NAME_AXES and len(v) > 1]
    order = slowest + [k for k in ("seed", "noise", "layers", "arch") if k in options and k not in slowest]
    order += [k for k in options if k not in NAME_AXES and k not in slowest]
    if isinstance(overrides, (str, bytes, Mapping)) or not isinstance(overrides, Iterable):
        raise InvalidType(f"overrides must be a list of dicts, got {type(overrides).__name__}")
    if not all(isinstance(o, Mapping) for o in overrides):
        raise InvalidType("overrides must be a list of dicts ({'where': {...}, option: value, ...})")
    overrides = [dict(o) for o in overrides]
    for o in overrides:
        bad = [k for k in o if k not in ("where", "skip") and (k not in OPTIONS or k in NAME_AXES)]
        if o.get("skip", False) not in (True, False) or o.get("skip") and len(o) != 2:
            bad = ["skip"]
        if bad:
            raise SweepError(
                f"override {o!r:.200}: {bad[0]} cannot be set per run "
                f"(set options other than {', '.join(NAME_AXES)}; match them with where)"
            )
        where = o.get("where", {})
        if not isinstance(where, Mapping):
            raise SweepError(f"override {o!r:.200}: where must be a table of option = value, got {where!r:.60}")
        unknown = [k for k in where if k not in OPTIONS]
        if unknown:
            raise SweepError(f"override {o!r:.200}: where names {unknown[0]!r:.60}, which is no run option")

    def matches(opts: dict, where: dict) -> bool:
        values = lambda v: v if isinstance(v, list) else [v]  # noqa: E731
        return all(
            any(_canonical(k, opts.get(k, _default(k))) == _canonical(k, x) for x in values(v))
            for k, v in where.items()
        )

    specs, seen = [], {}
    for combo in itertools.product(*(options[k] for k in order)):
        opts = dict(zip(order, combo))
        if any(o.get("skip") and matches(opts, o.get("where", {})) for o in overrides):
            continue
        for o in overrides:
            if not o.get("skip") and matches(opts, o.get("where", {})):
                opts.update({k: v for k, v in o.items() if k != "where"})
        name = run_name(opts, swept)
        if name in seen:
            raise SweepError(
                f"two runs would share the directory {name} ({seen[name]} and {opts}); "
                f"vary fewer options or give them different values"
            )
        seen[name] = opts
        if opts.get("init"):  # workers (Ray nodes, a forkserver) need not share this process's directory
            opts["init"] = os.path.abspath(opts["init"])
        spec = RunSpec(name, opts)
        try:
            spec.cfg = config_from_options(opts)
            resolve(spec.cfg)
        except (ValueError, TypeError) as err:
            spec.cfg, spec.error = None, f"bad setting: {err}"
        specs.append(spec)
    return specs


def unmatched_where(options: Mapping[str, Any], overrides: Iterable[Mapping[str, Any]] = ()) -> list[str]:
    """Each value an override's `where` names that no run of the grid can have (neither among the grid's values of that
    option, its default, nor a value an override sets): a typo there (attention = "kernel-norm" for "kernel_norm")
    would skip or change no run and say nothing. One line each, for `interp sweep` to print as a note (not an error: a
    grid trimmed for a quick try keeps overrides for the values it left out)."""
    have: dict[str, list] = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in options.items()}
    for o in overrides:
        for k, v in o.items():
            if k not in ("where", "skip"):
                have.setdefault(k, []).append(v)
    out = []
    for i, o in enumerate(overrides, 1):
        for k, v in o.get("where", {}).items() if isinstance(o.get("where", {}), Mapping) else ():
            if k not in OPTIONS:  # expand() names it
                continue
            values = have.get(k, []) + ([] if k in options else [_default(k)])
            for x in v if isinstance(v, list) else [v]:
                if not any(_canonical(k, x) == _canonical(k, h) for h in values):
                    listed = ", ".join(repr(h) for j, h in enumerate(values) if h not in values[:j])  # lists too
                    out.append(f"override {i}: where {k} = {x!r:.60} matches no run (the grid's {k}: {listed:.200})")
    return out


def run_name(opts: Mapping[str, Any], swept: Iterable[str] = ()) -> str:
    """{arch}{layers}_{prior}_s{seed}, then _{option}{value} for each varied option: full4_uniform5_s0_lr0.002."""
    get = lambda k: opts.get(k, _default(k))  # noqa: E731
    try:
        prior = prior_slug(get("noise"))
    except ValueError:
        prior = _value_slug(get("noise"))
    name = f"{get('arch')}{get('layers')}_{prior}_s{get('seed')}"
    return name + "".join(f"_{k.replace('_', '')}{_value_slug(get(k))}" for k in swept)


def load_grid_file(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(options, overrides) from a TOML or JSON grid file: option = value or [values], and [[override]]
    tables with a `where` table. Option names as `interp train`'s flags, dashes or underscores."""
    path = Path(path)
    try:
        text = read_regular_file(path, MAX_CONFIG_BYTES, "grid file").decode()  # bounded, regular files only
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import tomllib  # Python 3.11+

            data = tomllib.loads(text)
    except CheckpointError as err:  # no such file, a FIFO or device, too large: the message names the file
        raise SweepError(str(err)) from None
    except ImportError:
        raise SweepError(f"{path}: reading TOML needs Python 3.11; write the grid as JSON") from None
    except (OSError, ValueError) as err:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise SweepError(f"{path}: cannot read grid file ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise SweepError(f"{path}: a grid file is a table of options")
    norm = lambda k: ALIASES.get(k.replace("-", "_"), k.replace("-", "_"))  # noqa: E731
    overrides = data.pop("override", [])
    if not isinstance(overrides, list) or not all(isinstance(o, dict) for o in overrides):
        raise SweepError(f"{path}: override must be a list of tables ([[override]])")
    options = {norm(k): v for k, v in data.items()}
    overrides = [{norm(k) if k != "where" else k: v for k, v in o.items()} for o in overrides]
    for i, o in enumerate(overrides):
        if not isinstance(o.get("where", {}), dict):
            got = o["where"]
            raise SweepError(f"{path}: override {i + 1}: where must be a table of option = value, got {got!r:.60}")
        if "where" in o:
            o["where"] = {norm(k): v for k, v in o["where"].items()}
    for key, value in options.items():
        if isinstance(value, list) and not value:
            raise SweepError(f"{path}: {key} = []: an empty list of values (give at least one, or leave it out)")
    bad = [
        k
        for k in [*options, *(k for o in overrides for k in [*o, *o.get("where", {})] if k not in ("where", "skip"))]
        if k not in OPTIONS and k != "order"  # order: the run order (expand), not a run option
    ]
    if bad:
        raise SweepError(f"{path}: unknown option {bad[0]!r} (use interp train's option names)")
    return options, overrides
