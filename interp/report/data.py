"""What the report shows, gathered from checkpoints: evaluation, per-layer curves, weights, probes, trajectories.

Each model's record is cached next to its checkpoint (`<run>/report_cache.json`) under the shared key of
interp.evalcache (the checkpoint file's SHA-256, its sequences, the evaluation code's version) with the settings and
REPORT_VERSION, so a second report over the same models, or over a copy of them, only re-reads small JSON files.
The baselines are computed once per noise prior and cached in the same files of that prior's models, keyed by
what determines them (`_baseline_key`).

A directory of standalone checkpoint files (the Table 1 zoo, experiments/zoo/best/<prior>/<arch><L>.safetensors,
each embedding its training config) gives light entries: their adjusted loss (from the directory's evals.json when it
holds the report's sequences, as `interp table` stored it) and, for 7 layers, the per-σ profile after the last layer
(`light_record`), cached like the other records; they are never probed. With them the report covers every prior of
Table 1, and the baselines of a prior without any model are cached in the directory's own report_cache.json.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from interp.config import Matrix, describe_covariance
from interp.evalcache import EvalCache, cache_key, cached_loss
from interp.evalset import EvalSet
from interp.evaluate import (
    TABLE1_COLUMNS,
    LossEstimate,
    adjusted_loss,
    evaluate,
    paper_value,
    per_layer_loss,
    per_layer_profile,
    sigma_grid,
    sigma_profile,
)
from interp.files import CheckpointError, open_regular, read_regular_file
from interp.limits import MAX_TEXT_BYTES
from interp.params import Parameterization, of
from interp.probes.drift import DriftData, drift_record
from interp.probes.linearity import VariantStudy
from interp.probes.preconditioning import Theorem51, theorem51
from interp.probes.readout import READOUT_VERSION, readout_summary
from interp.probes.summary import ProbeResult, probe_model
from interp.records import Record, jsonable
from interp.report.pool import Task, run_tasks
from interp.run import ResolvedModel, Run, load_with_digest, resolve_model
from interp.table import PAPER_ORDER, paper_order
from interp.tasks import as_prior
from interp.tuning import baselines
from interp.variants import cell_name

# 2: probe sequences drawn by interp.evalset (the same for any chunk size); 3: layer schedule; 4: the probe's ConstRR λ
# is interp.tuning's, and its DIAG ablation has standard errors; 5: the loss after K layers on its own `layer_seq`
REPORT_VERSION = 5
CACHE_FILE = "report_cache.json"
CACHE_KEEP = 96  # records kept per cache file (the oldest drop out)
TABLE1_ZOO = "best"  # experiments/zoo/best: the best seed of every Table 1 cell, one folder per prior
TRAJECTORIES = "trajectories"  # experiments/zoo/trajectories: run directories kept for their checkpoints (drift)
# The cells of a directory of standalone checkpoints that the report probes (the rest are light entries): every depth
# on the paper's two main priors (Vladymyrov et al. 2024, Figures 1-3: σ_max = 5 and {1,3}), and the 4- and 7-layer
# models on every prior.
PROBED_PRIORS = ("uniform:5", "categorical:1,3")
PROBED_DEPTHS = (4, 7)
EVALS_FILE = "evals.json"  # a checkpoint directory's evaluation cache (interp.evalcache), as the Table 1 zoo ships it
LIGHT_DEPTH = 7  # light entries of this depth get their per-σ profile (Vladymyrov et al. 2024, Figures 2 and 3)
BASELINES = ("constrr", "adarr", "tunedrr", "bayes")  # the paper's ridge baselines and the Bayes floor


@dataclass(frozen=True)
class Settings:
    """Sequence counts of every measurement; the defaults take about 2 minutes on the zoo's 90 probed models (two
    processes, experiments/results/bench_report.md). The counts behind a view are named in its hover text or caption;
    each is the smallest whose standard errors stay below the differences the view is read for."""

    n_seq: int = 100_000  # adjusted loss on the training prior: interp eval's default, so the two agree
    layer_seq: int = 20_000  # the loss after K = 0..L layers on the prior (the last layer's is `n_seq`'s)
    profile_seq: int = 2_000  # per σ of the per-σ and per-layer profiles
    probe_seq: int = 2_000  # sequences of the implicit-model probes
    fit_seq: int = 1_024  # disjoint sequences for the form fits and GD-step / constant-λ tuning
    ablation_seq: int = 2_000  # FULL models: adjusted loss with layers replaced by their DIAG projection
    schedule_seq: int = 2_000  # every model: the layer schedule's single-block ablation (interp.probes.schedule)
    sigma_step: float = 0.5
    seed: int = 0
    drift_points: int = 6  # checkpoints per FULL run on the drift curves
    drift_seq: int = 2_000  # sequences for the drift losses (same for every checkpoint)
    drift_fit_seq: int = 1_024
    preview: bool = False  # interp report --quick: the numbers are marked as a preview (not part of any cache key)

    @classmethod
    def quick(cls) -> "Settings":
        """Small counts for tests and previews (noisy numbers, same figures), marked as a preview."""
        return cls(
            n_seq=1_000,
            layer_seq=1_000,
            profile_seq=300,
            probe_seq=300,
            fit_seq=256,
            ablation_seq=300,
            schedule_seq=300,
            sigma_step=1.0,
            drift_points=4,
            drift_seq=300,
            drift_fit_seq=256,
            preview=True,
        )

    def measured(self) -> dict:
        """The settings that change what is measured (all but `preview`): what the cache keys hold."""
        return {k: v for k, v in asdict(self).items() if k != "preview"}


@dataclass
class Entry:
    """One model of the report: where it lives and what it is."""

    path: str  # as given (run directory or checkpoint file)
    label: str
    checkpoint: Path
    run_dir: Path | None
    step: int | None
    total_steps: int | None
    arch: str
    n_layers: int
    n_heads: int
    d: int
    n: int
    noise: str
    x_cov: Matrix | None = None  # the run's input covariance Λ, x ~ N(0, Λ) (None: I, or a loose checkpoint)
    seed: int | None = None  # the training seed (None: not recorded)
    attention: str = "lsa"  # the token mixer (interp.variants): lsa is the paper's P, Q layer
    mlp: str = "none"  # the FFN after each attention layer
    quad: float = 0.0  # c of the quadratic task it was trained on (interp.tasks); 0: the paper's task

    @property
    def is_paper(self) -> bool:
        """Whether it is the paper's model on the paper's task (FULL, DIAG or GD++), which the report probes; the
        others are read by the family views (`family_job`)."""
        return self.attention == "lsa" and self.mlp == "none" and not self.quad

    @property
    def complete(self) -> bool:
        return self.total_steps is None or self.step == self.total_steps

    @property
    def parameterization(self) -> Parameterization:
        """The architecture's object (interp.params), which says what it does differently."""
        return of(self.arch)


# ---------------------------------------------------------------------------- finding models
def default_zoo() -> Path | None:
    """experiments/zoo under the working directory, else beside the installed package (editable install)."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        zoo = root / "experiments" / "zoo"
        if zoo.is_dir():
            return zoo
    return None


def zoo_runs(zoo: Path) -> list[Path]:
    """Run directories directly under `zoo` that hold at least one checkpoint, in a stable order."""
    runs = [r.path for r in Run.find(zoo) if r.checkpoints()]
    arch_rank = {a.name: i for i, a in enumerate(PAPER_ORDER)}

    def key(p: Path):
        try:
            cfg = Run(p).config()
            noise = cfg.noise  # uniform priors (the paper's main setting) first
            return (
                not noise.startswith("uniform"),
                noise,
                cfg.model.n_layers,
                arch_rank.get(cfg.model.param, 3),
                p.name,
            )
        except CheckpointError:
            return (True, "~", 0, 9, p.name)

    return sorted(runs, key=key)


def make_entry(path: str | Path, noise: str | None = None) -> Entry:
    """Resolve a run directory (its last checkpoint) or a checkpoint file; CheckpointError if unusable."""
    return entry_of(resolve_model(path), noise)


def entry_of(m: ResolvedModel, noise: str | None = None, label: str | None = None) -> Entry:
    """The Entry of a resolved model (`label`: its name in the report, by default the run's or the file's)."""
    path = m.path
    # a directory without a config that holds checkpoints/ still keeps its cache and metrics beside them
    run = m.run.path if m.run is not None else path if path.is_dir() else None
    noise = noise or m.noise
    if noise is None:
        raise CheckpointError(f"{path}: records no training noise prior; pass --noise")
    label = label or (
        run.name
        if run is not None and path.is_dir()
        else (f"{run.name}@{m.step}" if run is not None else m.checkpoint.stem)
    )
    c = m.model.cfg
    return Entry(
        str(path),
        label,
        m.checkpoint,
        run,
        m.step,
        None if m.config is None else m.config.steps,
        c.param,
        c.n_layers,
        c.n_heads,
        m.d,
        20 if m.n is None else m.n,
        as_prior(noise).spec,
        m.x_cov,
        None if m.config is None else m.config.seed,
        c.attention,
        c.mlp,
        0.0 if m.config is None else m.config.quad,
    )


CHECKPOINT_SUFFIX = ".safetensors"  # a checkpoint file's name (docs/checkpoints.md)


def is_checkpoint_file(path: Path) -> bool:
    """Whether a file given to the report is meant as a checkpoint: named *.safetensors, or holding a safetensors
    header (8 bytes of header length, then its JSON's "{"), so sweep.json or a note beside the runs is not. A path
    that is no regular file counts (make_entry says what is wrong with it)."""
    if path.suffix == CHECKPOINT_SUFFIX:
        return True
    try:
        with open_regular(path, what="checkpoint") as f:
            if f.size < 9:
                return False
            head = f.read_at(0, 9)
    except CheckpointError:
        return True
    return head[8:9] == b"{" and 8 + int.from_bytes(head[:8], "little") <= f.size


def model_paths(paths: list[str | Path], log=None) -> list[Path]:
    """The models to probe among `paths`, in order, each once: a run directory or a directory holding checkpoints/ as it
    is, a checkpoint file as it is (`is_checkpoint_file`), and a directory of run directories (a sweep root, the zoo)
    as its runs with checkpoints (`zoo_runs`). A directory of standalone checkpoint files (the Table 1 zoo) gives light
    entries instead (`checkpoint_dirs`). Anything else is skipped, with a line to `log` saying why: another file (a
    sweep root's sweep.json and table1_evals.json, when a shell glob hands them over), a run with no checkpoint yet, a
    directory holding no runs."""
    say = log or (lambda msg: None)
    out: dict[str, Path] = {}
    for path in map(Path, paths):
        if path.is_dir():
            if Run.is_run(path) and not Run(path).checkpoints():
                say(f"skipping {path}: a run with no checkpoint yet")
                found = []
            elif Run.is_run(path) or (path / Run.CKPT_DIR).is_dir():
                found = [path]
            else:
                found = zoo_runs(path)
                if not found and not standalone_files(path):  # a directory of standalone files: light entries
                    say(f"skipping {path}: neither a run directory nor a directory of runs or of checkpoint files")
        elif is_checkpoint_file(path):
            found = [path]
        else:
            say(f"skipping {path}: not a checkpoint file (*{CHECKPOINT_SUFFIX}) or a run directory")
            found = []
        for p in found:
            out.setdefault(os.path.realpath(p), p)
    return list(out.values())


def standalone_files(directory: Path) -> list[Path]:
    """The checkpoint files (*.safetensors) in `directory` and in its folders one level down, when it holds no run
    (the Table 1 zoo's layout, <prior>/<arch><L>.safetensors), sorted by path."""
    if Run.is_run(directory) or (directory / Run.CKPT_DIR).is_dir() or zoo_runs(directory):
        return []
    files = [
        p
        for p in (*directory.glob(f"*{CHECKPOINT_SUFFIX}"), *directory.glob(f"*/*{CHECKPOINT_SUFFIX}"))
        if p.is_file() and not Run.is_run(p.parent)
    ]
    return sorted(files)


def default_models(zoo: Path) -> list[Path]:
    """What `interp report` reads without arguments: the zoo's best model of every Table 1 cell (`TABLE1_ZOO`: the
    cells `is_probed_cell` picks probed, the others light entries), and any run directly under the zoo (probed)."""
    best = zoo / TABLE1_ZOO
    return [*zoo_runs(zoo), *([best] if best.is_dir() else [])]


def default_drift(zoo: Path) -> list[Path]:
    """The run directories `interp report` reads for their drift curves only: the zoo's `TRAJECTORIES`."""
    runs = zoo / TRAJECTORIES
    return [runs] if runs.is_dir() and zoo_runs(runs) else []


def checkpoint_dirs(paths: list[str | Path]) -> list[str]:
    """The directories of standalone checkpoint files among `paths` (`standalone_files`): their files are light
    entries."""
    return list(dict.fromkeys(str(p) for p in map(Path, paths) if p.is_dir() and standalone_files(p)))


def entries_of(paths: list[str | Path], noise: str | None = None, log=None, light: bool = False) -> list[Entry]:
    """One Entry per model among `paths` (`model_paths`); CheckpointError when there is none, unless `light` (the
    paths hold light entries)."""
    found = model_paths(paths, log)
    if not found and not light:
        given = ", ".join(map(str, paths[:3])) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        raise CheckpointError(f"no models to report on among {given or 'nothing'}")
    return [make_entry(p, noise) for p in found]


def unique_labels(entries: list[Entry]) -> None:
    seen: dict[str, int] = {}
    for e in entries:
        seen[e.label] = seen.get(e.label, 0) + 1
    for e in entries:
        if seen[e.label] > 1:
            e.label = e.path


# ---------------------------------------------------------------------------- per-model record
def _cache_path(entry: Entry) -> Path:
    return (entry.run_dir or entry.checkpoint.parent) / CACHE_FILE


def cache_files(entries: list[Entry]) -> list[Path]:
    """The report cache files of `entries`, each once."""
    return list(dict.fromkeys(_cache_path(e) for e in entries))


def _on_prior(entry: Entry, settings: Settings) -> EvalSet:
    """The sequences of an entry's adjusted loss: n_seq of seed `settings.seed` of its training prior, d, n, Λ and
    task (quad)."""
    return EvalSet(
        entry.noise, d=entry.d, n=entry.n, n_seq=settings.n_seq, seed=settings.seed, x_cov=entry.x_cov, quad=entry.quad
    )


def _cache_key(entry: Entry, settings: Settings, digest: str, light: bool = False) -> str:
    """The evaluation cache's key (interp.evalcache.cache_key): the checkpoint's digest, the sequences of the record's
    loss on the prior, the evaluation code's version, and the rest of what the record measures (REPORT_VERSION and
    the settings of the other measurements; a light record's: its profile's)."""
    measured = settings.measured()
    if light:
        return cache_key(
            digest,
            _on_prior(entry, settings),
            kind="report-light",
            report_version=REPORT_VERSION,
            settings={k: measured[k] for k in ("profile_seq", "sigma_step")},
        )
    return cache_key(
        digest, _on_prior(entry, settings), kind="report", report_version=REPORT_VERSION, settings=measured
    )


def _read_cache(path: Path) -> dict:
    """{"records": key -> record} of a per-run cache file (interp.evalcache's format: bounded read, every record
    checked against its digest; an edited record or a file that is no cache is left out with a warning). One zoo
    folder's file holds the records of all its models: it is parsed and checked once per version of the file."""
    try:
        st = path.stat()
    except OSError:
        return {"records": {}}
    return {"records": _records(str(path), st.st_ino, st.st_mtime_ns, st.st_size)}


@lru_cache(maxsize=32)
def _records(path: str, inode: int, mtime_ns: int, size: int) -> dict:
    """The checked records of the cache file `path` as it is at (inode, mtime, size): a write replaces the file by a
    rename (a new inode), so a changed file is a new key. Callers read the records, never change them."""
    return EvalCache(Path(path), strict=False).values()


def _cached(path: Path, key: str, kind: type[Record]) -> Record | None:
    """The record of `kind` under `key` in the cache file `path`, marked as read from the cache; None if absent."""
    hit = _read_cache(path).get("records", {}).get(key)
    if hit is None:
        return None
    rec = kind.from_json(hit)
    rec.cached = True
    return rec


def _write_cache(path: Path, key: str, record: dict) -> None:
    try:
        EvalCache(path, strict=False, keep=CACHE_KEEP, log=None).put(key, record)  # atomic, merged
    except OSError:
        pass  # a read-only model directory: the report still works, it only recomputes next time


@dataclass
class ModelRecord(Record):
    """Everything the report shows about one checkpoint (cached as its JSON)."""

    loss: LossEstimate  # on the training prior, after all layers
    per_layer: list[LossEstimate]  # after K = 0..L layers, on the prior
    sigmas: list
    profile_mean: list  # [K][σ] after K = 0..L layers at each fixed σ
    profile_stderr: list
    P: list  # [L][D][D], first head
    Q: list
    probe: ProbeResult
    seconds: float
    cached: bool | None = None  # set on return: whether it came from the cache


def measure_model(entry: Entry, settings: Settings, loss: LossEstimate | None = None) -> dict:
    """Everything the report shows about one checkpoint, computed (no cache): a ModelRecord's JSON. `loss`: its
    adjusted loss on the `n_seq` sequences of the prior where the caller holds it (the zoo's evals.json), else
    measured. Runs in a worker process of `gather` as well as in the caller's."""
    model, _, _ = load_with_digest(entry.checkpoint)
    t0 = time.perf_counter()  # the model is evaluated in its own dtype, like `interp eval`; probes use float64
    s = settings
    on_prior = _on_prior(entry, s)
    sigmas = sigma_grid(entry.noise, s.sigma_step)
    curve = per_layer_loss(model, on_prior.replace(n_seq=s.layer_seq))
    grid = per_layer_profile(model, sigmas, on_prior.replace(n_seq=s.profile_seq))
    ablation = 0 if entry.parameterization.has_omegas else s.ablation_seq  # a DIAG / GD++ layer is its DIAG projection
    probes = on_prior.replace(n_seq=s.probe_seq, chunk=1_000)
    probe = probe_model(model, probes, fit_seq=s.fit_seq, ablation_seq=ablation, schedule_seq=s.schedule_seq)
    record = ModelRecord(
        loss=loss or adjusted_loss(model, on_prior),
        per_layer=curve,
        sigmas=sigmas,
        profile_mean=[[e.mean for e in row] for row in grid],
        profile_stderr=[[e.stderr for e in row] for row in grid],
        P=model.P.detach()[:, 0].tolist(),
        Q=model.Q.detach()[:, 0].tolist(),
        probe=probe,
        seconds=time.perf_counter() - t0,
    )
    return record.to_json()  # as it reads back from the cache (non-finite floats: None)


@dataclass
class Pending:
    """A record not in the cache: the Task that measures it (its JSON) and `finish(json) -> record`, which caches
    it. `resolve` runs every pending task of a report in one pool of workers."""

    task: Task
    finish: Callable[[dict], Any]


def resolve(jobs: dict, workers: int = 1, on_done=None) -> dict:
    """{key: record} of `jobs` ({key: record or Pending}): the pending ones measured in `workers` processes
    (interp.report.pool.run_tasks; `on_done(key)` as each ends), finished (cached) here."""
    pending = {k: j for k, j in jobs.items() if isinstance(j, Pending)}
    note = on_done or (lambda key: None)
    done = run_tasks({k: j.task for k, j in pending.items()}, workers, on_done=lambda key, _: note(key))
    return {k: pending[k].finish(done[k]) if k in pending else j for k, j in jobs.items()}


def model_job(
    entry: Entry, settings: Settings, use_cache: bool = True, evals: EvalCache | None = None
) -> "ModelRecord | Pending":
    """The cached record of one checkpoint, or the Pending that measures it (`measure_model`, its loss from `evals`,
    the directory's evaluation cache, read only, when that holds it)."""
    _, _, digest = load_with_digest(entry.checkpoint)  # bounded, checked against its run's config
    cost = entry.n_layers * (2 - entry.parameterization.has_omegas)
    return _job(
        _cache_path(entry),
        _cache_key(entry, settings, digest),
        ModelRecord,
        lambda: Task(measure_model, (entry, settings, _evals_loss(entry, settings, evals)), cost=cost),
        use_cache,
    )


def _job(cache: Path, key: str, kind: type, task: Callable[[], Task], use_cache: bool):
    """The record of `kind` under `key` in the cache file `cache` (marked cached), or the Pending that runs `task()`
    and, when it is finished, writes the record there and returns it (marked not cached)."""
    hit = _cached(cache, key, kind) if use_cache else None
    if hit is not None:
        return hit

    def finish(record: dict):
        if use_cache:
            _write_cache(cache, key, record)
        out = kind.from_json(record)
        out.cached = False
        return out

    return Pending(task(), finish)


def model_record(
    entry: Entry, settings: Settings, use_cache: bool = True, evals: EvalCache | None = None
) -> ModelRecord:
    """Everything the report shows about one checkpoint; from the cache when it matches (`model_job`)."""
    return resolve({0: model_job(entry, settings, use_cache, evals)})[0]


def _evals_loss(entry: Entry, settings: Settings, evals: EvalCache | None) -> LossEstimate | None:
    """The entry's adjusted loss on its `n_seq` prior sequences from a directory's evaluation cache, if it holds it."""
    if evals is None:
        return None
    _, _, digest = load_with_digest(entry.checkpoint)
    return cached_loss(digest, _on_prior(entry, settings), evals, None)[0]  # compute=None: never written


# ---------------------------------------------------------------------------- light entries (the Table 1 zoo)
@dataclass
class LightRecord(Record):
    """What the report shows of a light entry: its adjusted loss and, at LIGHT_DEPTH layers, its per-σ profile after
    the last layer (the same sequences as a probed model's profile_mean[-1])."""

    loss: LossEstimate  # on the training prior, the same sequences as a probed model's
    sigmas: list | None = None
    profile_mean: list | None = None  # [σ], after all layers
    profile_stderr: list | None = None
    cached: bool | None = None  # set on return: whether it came from the report cache


def light_record(
    m: ResolvedModel, entry: Entry, settings: Settings, evals: EvalCache | None = None, use_cache: bool = True
) -> LightRecord:
    """A light entry's record, from its report cache when it matches (keyed by the file's digest: a rewritten file
    misses); else its loss from `evals` (the directory's evaluation cache, read only) when it holds these sequences,
    evaluated otherwise, and at LIGHT_DEPTH layers its per-σ profile, computed and cached."""
    key = _cache_key(entry, settings, m.sha256, light=True)
    cache = _cache_path(entry)
    hit = _cached(cache, key, LightRecord) if use_cache else None
    if hit is not None:
        return hit
    on_prior = _on_prior(entry, settings)
    loss = None if evals is None else cached_loss(m.sha256, on_prior, evals, None)[0]  # compute=None: never written
    record = LightRecord(loss or adjusted_loss(m.model, on_prior))
    if entry.n_layers == LIGHT_DEPTH:
        sigmas = sigma_grid(entry.noise, settings.sigma_step)
        prof = sigma_profile({"m": m.model}, sigmas, on_prior.replace(n_seq=settings.profile_seq))["m"]
        record.sigmas = sigmas
        record.profile_mean = [e.mean for e in prof]
        record.profile_stderr = [e.stderr for e in prof]
    record = LightRecord.from_json(record.to_json())  # as it reads back from the cache
    if use_cache:
        _write_cache(cache, key, record.to_json())
    record.cached = False
    return record


def is_probed_cell(entry: Entry) -> bool:
    """Whether a standalone checkpoint's cell is probed by the report (PROBED_PRIORS, PROBED_DEPTHS) or light."""
    return entry.noise in PROBED_PRIORS or entry.n_layers in PROBED_DEPTHS


@dataclass
class Standalone:
    """A standalone checkpoint file of a directory (`standalone_files`): its entry, the file read once, and the
    directory's evaluation cache (None where it ships none)."""

    entry: Entry
    model: ResolvedModel
    evals: EvalCache | None


def standalone_entries(dirs: list[str], noise=None, log=None) -> list[Standalone]:
    """Every standalone checkpoint file of `dirs`, labelled by its path from the directory's name (best/uniform5/full7),
    in the paper's order; a file that cannot be read (no prior recorded, a broken file) is skipped with a line to
    `log`."""
    say = log or (lambda msg: None)
    out: dict[str, Standalone] = {}
    for root in map(Path, dirs):
        evals = EvalCache(root / EVALS_FILE, strict=False, log=say) if (root / EVALS_FILE).is_file() else None
        for file in standalone_files(root):
            try:
                m = resolve_model(file)  # read once: the entry, the digest of the cache key, the model of a miss
                entry = entry_of(m, noise, label="/".join(file.relative_to(root.parent).with_suffix("").parts))
            except CheckpointError as err:
                say(f"skipping {file}: {err}")
                continue
            out.setdefault(entry.label, Standalone(entry, m, evals))
    return sorted(out.values(), key=lambda f: paper_order((f.entry.arch, f.entry.n_layers, f.entry.noise)))


def light_entries(dirs: list[str], settings: Settings, noise=None, use_cache=True, log=None) -> dict[str, tuple]:
    """label -> (Entry, LightRecord) of every standalone checkpoint file of `dirs` (`standalone_entries`)."""
    return {
        f.entry.label: (f.entry, light_record(f.model, f.entry, settings, f.evals, use_cache))
        for f in standalone_entries(dirs, noise, log)
    }


# ---------------------------------------------------------------------------- Theorem 5.1 (GD++ at σ = 0)
THEOREM51_VERSION = 1  # bump when interp.probes.Theorem51 gains or changes a field (its cached records then miss)


def measure_theorem51(entry: Entry, settings: Settings) -> dict:
    """Theorem 5.1's record of a GD++ model at σ = 0 (its JSON), computed (no cache)."""
    model, _, _ = load_with_digest(entry.checkpoint)
    return theorem51(model, _on_prior(entry, settings), probe_seq=settings.probe_seq).to_json()


def theorem51_job(entry: Entry, settings: Settings, use_cache: bool = True) -> "Theorem51 | Pending | None":
    """Theorem 5.1 on a GD++ model of a noise-free prior (interp.probes.theorem51: the loss after K layers on the
    sequences of its adjusted loss, the spectra on `probe_seq` of them), cached beside it under its own key, or the
    Pending that measures it; None for any other model (a probed one or a light entry alike)."""
    if entry.arch != "gdpp" or as_prior(entry.noise).sigma_max != 0:
        return None
    _, _, digest = load_with_digest(entry.checkpoint)
    key = cache_key(  # THEOREM51_VERSION: the fields of interp.probes.Theorem51
        digest,
        _on_prior(entry, settings),
        kind="report-theorem51",
        version=THEOREM51_VERSION,
        probe_seq=settings.probe_seq,
    )
    return _job(
        _cache_path(entry),
        key,
        Theorem51,
        lambda: Task(measure_theorem51, (entry, settings), entry.n_layers),
        use_cache,
    )


def theorem51_record(entry: Entry, settings: Settings, use_cache: bool = True) -> Theorem51 | None:
    """Theorem 5.1's record of one model (`theorem51_job`, resolved here); None unless GD++ on a noise-free prior."""
    job = theorem51_job(entry, settings, use_cache)
    return None if job is None else resolve({0: job})[0]


def theorem51_records(models: list[Entry], settings: Settings, use_cache: bool = True) -> dict[str, Theorem51]:
    """label -> Theorem 5.1's record (`theorem51_job`) of every GD++ model on a noise-free prior among `models`."""
    jobs = {e.label: job for e in models if (job := theorem51_job(e, settings, use_cache)) is not None}
    return resolve(jobs)


# ---------------------------------------------------------------------------- baselines per prior
@dataclass
class BaselineRecord(Record):
    """The ridge baselines and the Bayes floor on one prior: on the prior and per σ (the models' sequences)."""

    noise: str
    sigmas: list
    loss: dict[str, LossEstimate]
    profile: dict[str, list]  # name -> mean adjusted loss per σ
    paper: dict[str, float | None]  # name -> Table 1 value
    x_cov: list | None = None  # the input covariance Λ of the prior's models, x ~ N(0, Λ) (None: I)
    cached: bool | None = field(default=None, compare=False)  # set by baseline_job: whether it came from a cache


def baseline_record(
    noise: str, settings: Settings, d: int = 10, n: int = 20, gd_steps=(1,), x_cov: Matrix | None = None
) -> BaselineRecord:
    """Adjusted loss of the ridge baselines and the Bayes floor on the prior and per σ (same seeds as the models),
    tuned and measured on inputs x ~ N(0, x_cov)."""
    names = [b for b in BASELINES if n > d or b not in ("adarr", "tunedrr")]
    preds = baselines(noise, d, n, gd_steps=gd_steps, names=names, x_cov=x_cov)
    sigmas = sigma_grid(noise, settings.sigma_step)
    on_prior = EvalSet(noise, d=d, n=n, n_seq=settings.n_seq, seed=settings.seed, x_cov=x_cov)
    prof = sigma_profile(preds, sigmas, on_prior.replace(n_seq=settings.profile_seq))
    rec = BaselineRecord(
        noise,
        sigmas,
        evaluate(preds, on_prior),
        {k: [e.mean for e in v] for k, v in prof.items()},
        {k: paper_value(k, noise, None, d, n, x_cov) for k in preds},
        on_prior.describe().get("x_cov"),
    )
    return BaselineRecord.from_json(rec.to_json())


BASELINE_VERSION = 1  # bump when what baseline_record computes changes in a way the source digest cannot see
BASELINE_SOURCES = ("baselines.py", "tuning.py", "spectral.py", "evaluate.py", "evalset.py", "tasks.py", "data")


def _baseline_key(noise: str, settings: Settings, d: int, n: int, x_cov: Matrix | None) -> str:
    """The cache key of one prior's baselines: the prior, d, n, Λ, the sequences (counts, seed, σ grid) and a code
    version: BASELINE_VERSION and a digest of the modules that compute them and of the shipped tuned parameters."""
    root, code = Path(__file__).resolve().parents[1], hashlib.sha256()
    for name in BASELINE_SOURCES:
        for path in sorted((root / name).rglob("*.json")) if (root / name).is_dir() else [root / name]:
            code.update(path.read_bytes() if path.is_file() else b"-")
    s = settings
    blob = json.dumps(
        {
            "v": BASELINE_VERSION,
            "code": code.hexdigest(),
            "noise": as_prior(noise).spec,
            "d": d,
            "n": n,
            "x_cov": x_cov,
            "seq": [s.n_seq, s.profile_seq, s.seed, s.sigma_step],
        },
        sort_keys=True,
    )
    return "baselines-" + hashlib.sha256(blob.encode()).hexdigest()[:24]


def measure_baselines(noise: str, settings: Settings, d: int, n: int, x_cov: Matrix | None) -> dict:
    """baseline_record's JSON (for a worker of `resolve`)."""
    return baseline_record(noise, settings, d, n, x_cov=x_cov).to_json()


def baseline_job(
    noise: str, settings: Settings, d: int, n: int, x_cov: Matrix | None, caches: list[Path], use_cache: bool = True
) -> "BaselineRecord | Pending":
    """The baselines of a prior read from any of the report cache files `caches` (those of the prior's models,
    `cache_files`) that holds them (marked `cached`), else the Pending that computes them and writes all of them."""
    key = _baseline_key(noise, settings, d, n, x_cov)
    paths = list(dict.fromkeys(caches))
    if use_cache:
        for path in paths:
            hit = _read_cache(path).get("records", {}).get(key)
            if hit is not None:
                rec = BaselineRecord.from_json(hit)
                rec.cached = True
                return rec

    def finish(record: dict) -> BaselineRecord:
        if use_cache:
            for path in paths:
                _write_cache(path, key, record)
        return BaselineRecord.from_json(record)

    return Pending(Task(measure_baselines, (noise, settings, d, n, x_cov), cost=6), finish)


def cached_baseline_record(
    noise: str, settings: Settings, d: int, n: int, x_cov: Matrix | None, caches: list[Path], use_cache: bool = True
) -> tuple[BaselineRecord, bool]:
    """(baseline_record, whether it came from the cache): `baseline_job`, resolved here."""
    rec = resolve({0: baseline_job(noise, settings, d, n, x_cov, caches, use_cache)})[0]
    return rec, bool(rec.cached)


# ---------------------------------------------------------------------------- training trajectories
def training_curve(entry: Entry, max_points: int = 200) -> dict | None:
    """(step, training loss) from the run's metrics log, thinned to about `max_points` log-spaced steps."""
    if entry.run_dir is None:
        return None
    rows = []
    for rec in Run(entry.run_dir).read_metrics():
        try:
            rows.append((int(rec["step"]), float(rec["loss"])))
        except (ValueError, KeyError, TypeError):
            continue
    if not rows:
        return None
    if len(rows) > max_points:
        picks = sorted(
            {
                min(len(rows) - 1, int(round(math.expm1(i * math.log1p(len(rows) - 1) / (max_points - 1)))))
                for i in range(max_points)
            }
        )
        rows = [rows[i] for i in picks]
    return {"step": [r[0] for r in rows], "loss": [r[1] for r in rows]}


def _thin(items: list, count: int) -> list:
    """About `count` items, log-spaced by position (dense early, like the checkpoint schedule), the last included."""
    if len(items) <= count:
        return items
    idx = sorted({round(math.expm1(i * math.log1p(len(items) - 1) / (count - 1))) for i in range(count)})
    return [items[i] for i in idx]


@dataclass
class DriftCurves:
    """Drift points per FULL run label, or the reason there are none."""

    runs: dict = field(default_factory=dict)  # label -> list[DriftPoint]
    reason: str | None = None

    @property
    def available(self) -> bool:
        return self.reason is None


def _drift_key(e: Entry, digest: str, settings: Settings) -> str:
    blob = json.dumps(
        {
            "v": REPORT_VERSION,
            "drift": True,
            "sha": digest,
            "noise": e.noise,
            "n": e.n,
            **({} if e.x_cov is None else {"x_cov": e.x_cov}),
            "seq": settings.drift_seq,
            "fit": settings.drift_fit_seq,
        },
        sort_keys=True,
    )
    return "drift-" + hashlib.sha256(blob.encode()).hexdigest()[:24]


@lru_cache(maxsize=16)
def _drift_data(noise: str, d: int, n: int, x_cov: Matrix | None, eval_seq: int, fit_seq: int) -> DriftData:
    return DriftData.default(noise, d, n, eval_seq=eval_seq, fit_seq=fit_seq, x_cov=x_cov)


def measure_drift_point(e: Entry, path: Path, step: int, settings: Settings) -> dict:
    """The drift metrics of one checkpoint of a FULL run (a DriftPoint's JSON), computed (no cache)."""
    model, _, _ = load_with_digest(path)
    data = _drift_data(e.noise, e.d, e.n, e.x_cov, settings.drift_seq, settings.drift_fit_seq)
    return DriftPoint.of(drift_record(step, model, data, per_layer_gap=False)).to_json()


def drift_jobs(entries: list[Entry], settings: Settings, use_cache: bool = True) -> tuple[dict, str | None]:
    """({(label, step): DriftPoint or Pending} for about `drift_points` checkpoints of every FULL run among `entries`,
    cached per checkpoint in its run's cache file; without a FULL run directory, the reason there is none)."""
    runs = [e for e in entries if not e.parameterization.has_omegas and e.run_dir is not None]
    if not runs:
        return {}, "no FULL run directory among the models (DIAG and GD++ never leave DIAG)."
    jobs = {}
    for e in runs:
        ckpts = [
            (step, p) for step, p in Run(e.run_dir).checkpoints() if step > 0 and (e.step is None or step <= e.step)
        ]
        cache = e.run_dir / CACHE_FILE
        stored = _read_cache(cache).get("records", {}) if use_cache else {}
        for step, path in _thin(ckpts, settings.drift_points):
            key = _drift_key(e, load_with_digest(path)[2], settings)  # read once: the key's digest

            def finish(record: dict, cache=cache, key=key) -> DriftPoint:
                if use_cache:
                    _write_cache(cache, key, record)
                return DriftPoint.from_json(record)

            hit = stored.get(key)
            job = DriftPoint.from_json(hit) if hit is not None else None
            jobs[(e.label, step)] = job or Pending(
                Task(measure_drift_point, (e, path, step, settings), e.n_layers), finish
            )
    return jobs, None


def drift_curves(jobs: dict, reason: str | None, log=None) -> DriftCurves:
    """DriftCurves from the resolved `drift_jobs`."""
    if reason:
        return DriftCurves(reason=reason)
    out: dict[str, list] = {}
    for (label, _), rec in jobs.items():
        out.setdefault(label, []).append(rec)
    for label, recs in out.items():
        if log:
            log(f"drift {label}: {len(recs)} checkpoints")
    return DriftCurves(out)


def drift_records(
    entries: list[Entry], settings: Settings, use_cache: bool = True, log=None, workers: int = 1
) -> DriftCurves:
    """Drift metrics (interp.probes.drift) of about `drift_points` checkpoints of every FULL run, cached per checkpoint;
    without a FULL run directory, the reason (the report shows it)."""
    jobs, reason = drift_jobs(entries, settings, use_cache)
    return drift_curves(resolve(jobs, workers), reason, log)


@dataclass
class DriftPoint(Record):
    """What the report's drift panel shows of one checkpoint (interp.probes.drift.DriftRecord, cut down)."""

    step: int
    share_outside: list  # [L]
    share_outside_read: list
    remainder_effective_rank: list
    remainder_top1_share: list
    r2_diag: list
    loss: float
    loss_diag_projection: float
    gap_diag_projection: float
    gap_diag_projection_stderr: float

    @classmethod
    def of(cls, rec) -> "DriftPoint":
        w, f = rec.weights, rec.functional
        return cls.from_json(
            jsonable(
                cls(
                    rec.step,
                    w.share_outside,
                    w.share_outside_read,
                    w.remainder_effective_rank,
                    w.remainder_top1_share,
                    f.r2_diag,
                    f.loss,
                    f.loss_diag_projection,
                    f.gap_diag_projection,
                    f.gap_diag_projection_stderr,
                )
            )
        )


# ---------------------------------------------------------------------------- the variants study
VARIANTS_STUDY = Path("variants") / "summary.json"  # experiments/zoo/variants/summary.json (experiments/variants.py)


def variants_study(paths: list[str | Path]) -> VariantStudy | None:
    """The variants study (FFN, softmax and kernel attention: experiments/variants.py) beside the models: the first
    <parent of a path>/variants/summary.json (for `interp report`'s default models, experiments/zoo's); None where
    there is none. CheckpointError naming the file when it is not a study."""
    for parent in dict.fromkeys(Path(p).absolute().parent for p in paths):
        path = parent / VARIANTS_STUDY
        if not path.is_file():
            continue
        try:
            return VariantStudy.from_json(json.loads(read_regular_file(path, MAX_TEXT_BYTES, "variants study")))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            if isinstance(err, CheckpointError):
                raise
            raise CheckpointError(f"{path}: not a variants study ({type(err).__name__}: {err})") from None
    return None


# ---------------------------------------------------------------------------- the family study (issue 52)
@dataclass
class FamilyRecord(Record):
    """What the family views show of one model of the linear-attention family given to the report: a cell of a family
    study (experiments/family.py's format: prior, variant, layers, loss, and the readout, `readout_summary`)."""

    cell: dict
    seconds: float
    cached: bool | None = None


def measure_family(entry: Entry, settings: Settings) -> dict:
    """A FamilyRecord's JSON, computed: the adjusted loss on the entry's own task (its prior, d, n, Λ and quad; the
    report's n_seq sequences of its seed) and the one readout on `probe_seq` others (seed + 1)."""
    model, _, _ = load_with_digest(entry.checkpoint)
    t0 = time.perf_counter()
    on_task = _on_prior(entry, settings)
    batch = on_task.replace(n_seq=settings.probe_seq, seed=settings.seed + 1).draw()
    cell = {
        "prior": entry.noise,
        "variant": cell_name(model.cfg, entry.quad),
        "layers": entry.n_layers,
        "quad": entry.quad,
        "best": entry.label,
        "loss": adjusted_loss(model, on_task).to_dict(),
        **readout_summary(model, batch.tokens, batch.sigma),
    }
    return FamilyRecord(jsonable(cell), time.perf_counter() - t0).to_json()


def family_job(entry: Entry, settings: Settings, use_cache: bool = True) -> "FamilyRecord | Pending":
    """The cached FamilyRecord of one family model, or the Pending that measures it (`measure_family`)."""
    _, _, digest = load_with_digest(entry.checkpoint)
    key = cache_key(
        digest, _on_prior(entry, settings), kind="report-family", report_version=REPORT_VERSION,
        settings={"probe_seq": settings.probe_seq, "readout": READOUT_VERSION},
    )  # fmt: skip
    return _job(
        _cache_path(entry),
        key,
        FamilyRecord,
        lambda: Task(measure_family, (entry, settings), entry.n_layers),
        use_cache,
    )


def with_family_runs(study: dict | None, records: list[FamilyRecord]) -> dict | None:
    """The family study beside the models with the cells of the family models given to the report added, the best
    (lowest loss) of those that share a prior, variant and depth; None where there is neither."""
    if not records:
        return study
    best: dict = {}
    for r in records:
        c = r.cell
        key = (c["prior"], c["variant"], c["layers"])
        if key not in best or c["loss"]["mean"] < best[key]["loss"]["mean"]:
            best[key] = c
    study = study or {"meta": {}, "cells": []}
    return {**study, "cells": [*study["cells"], *best.values()]}


FAMILY_STUDY = Path("family") / "summary.json"  # experiments/zoo/family/summary.json (experiments/family.py)


def family_study(paths: list[str | Path]) -> dict | None:
    """The linear-attention family study beside the models (experiments/family.py's variants.json, copied to
    <parent of a path>/family/summary.json): its JSON document, with "cells" a list; None where there is none.
    CheckpointError naming the file when it is not one."""
    for parent in dict.fromkeys(Path(p).absolute().parent for p in paths):
        path = parent / FAMILY_STUDY
        if not path.is_file():
            continue
        try:
            doc = json.loads(read_regular_file(path, MAX_TEXT_BYTES, "family study"))
            if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
                raise ValueError("no list of cells")
            return doc
        except (ValueError, TypeError) as err:
            if isinstance(err, CheckpointError):
                raise
            raise CheckpointError(f"{path}: not a family study ({type(err).__name__}: {err})") from None
    return None


# ---------------------------------------------------------------------------- everything
@dataclass
class ReportData:
    entries: list[Entry]  # the probed models
    records: dict[str, ModelRecord]  # label -> model_record
    baselines: dict[str, BaselineRecord]  # prior spec -> baseline_record
    curves: dict[str, dict | None]  # label -> training_curve
    drift: DriftCurves
    settings: Settings
    timings: dict = field(default_factory=dict)
    light: list[Entry] = field(default_factory=list)  # the Table 1 zoo's cells: loss and 7-layer profile only
    light_records: dict[str, LightRecord] = field(default_factory=dict)  # label -> light_record
    light_dirs: list[str] = field(default_factory=list)  # the directories of standalone checkpoints given
    theorem51: dict[str, Theorem51] = field(default_factory=dict)  # label -> theorem51_record (GD++ at σ = 0)
    variants: VariantStudy | None = None  # the variants study beside the models (`variants_study`), if any
    family: dict | None = None  # the family study beside the models (`family_study`), if any
    drift_entries: list[Entry] = field(default_factory=list)  # run directories read for their drift curves only
    family_entries: list[Entry] = field(default_factory=list)  # models of the linear-attention family given
    family_records: dict[str, FamilyRecord] = field(default_factory=dict)  # label -> family_job's record

    def for_prior(self, prior: str) -> "ReportData":
        """The same report restricted to the models (probed, light and drift-only) trained on `prior`: what a view
        drawn per prior reads (`@view(per_prior=True)`)."""
        keep = lambda entries: [e for e in entries if e.noise == prior]  # noqa: E731
        runs = {e.label for e in keep([*self.entries, *self.drift_entries])}
        drift = (
            self.drift
            if not self.drift.available
            else DriftCurves({k: v for k, v in self.drift.runs.items() if k in runs})
        )
        return replace(
            self,
            entries=keep(self.entries),
            light=keep(self.light),
            drift_entries=keep(self.drift_entries),
            baselines={k: v for k, v in self.baselines.items() if k == prior},
            drift=drift,
        )

    @property
    def models(self) -> list[Entry]:
        """Every model: the probed ones, then the light entries."""
        return [*self.entries, *self.light]

    def loss(self, e: Entry) -> LossEstimate:
        """The adjusted loss on its training prior of a probed model or a light entry."""
        return (self.records.get(e.label) or self.light_records[e.label]).loss

    def last_profile(self, e: Entry) -> tuple[list, list, list] | None:
        """(σ's, mean, stderr) of the adjusted loss after all layers at each fixed σ; None for a light entry without
        one (fewer than LIGHT_DEPTH layers)."""
        r = self.records.get(e.label)
        if r is not None:
            return r.sigmas, r.profile_mean[-1], r.profile_stderr[-1]
        r = self.light_records[e.label]
        return None if r.profile_mean is None else (r.sigmas, r.profile_mean, r.profile_stderr)


TABLE1_TASK = (10, 20, None)  # Table 1's d, n and Λ (x ~ N(0, I)): the baselines of a prior without any model


def _task_sizes(models: list[Entry], table1: bool) -> dict[str, tuple]:
    """prior -> (d, n, x_cov) of its baselines (the figures draw one set of baselines per prior): every prior of the
    models, and every column of Table 1 with a Table 1 zoo; CheckpointError where a prior's models differ."""
    sizes = {}
    for prior in dict.fromkeys(e.noise for e in models):
        shapes = {(e.d, e.n, e.x_cov): e.label for e in models if e.noise == prior}
        if len(shapes) > 1:
            raise CheckpointError(
                f"models on {prior} differ in task size or input covariance ("
                + ", ".join(
                    f"{lab}: d={d}, n={n}, x ~ N(0, {describe_covariance(c)})" for (d, n, c), lab in shapes.items()
                )
                + "); baselines are per prior, so report them separately"
            )
        sizes[prior] = next(iter(shapes))
    if table1:
        sizes |= {p: TABLE1_TASK for p in TABLE1_COLUMNS if p not in sizes}
    return sizes


def gather(
    paths: list[str | Path],
    settings: Settings | None = None,
    noise: str | None = None,
    use_cache: bool = True,
    with_drift: bool = True,
    log=None,
    drift: list[str | Path] = (),
    workers: int = 1,
    probe: Callable[[Entry], bool] = is_probed_cell,
) -> ReportData:
    """Load, evaluate and probe every model (cached per checkpoint): the run directories and checkpoint files among
    `paths`, and of every directory of standalone checkpoints among them the cells `probe` picks (default
    `is_probed_cell`; the others are light entries: their loss and 7-layer profile); baselines per prior; drift
    curves of every FULL run among `paths` and `drift` (run directories read for their trajectory only). Whatever
    the caches lack is measured in `workers` processes (one torch thread each)."""
    settings = settings or Settings()
    say = log or (lambda msg: None)
    dirs = checkpoint_dirs(paths)
    entries = entries_of(paths, noise, say, light=bool(dirs))
    files = standalone_entries(dirs, noise, say)
    light_cell = lambda e: e.is_paper and not probe(e)  # noqa: E731  (a family file is never a light entry)
    entries += [f.entry for f in files if not light_cell(f.entry)]
    family = [e for e in entries if not e.is_paper]  # the family's models: read by the family views
    entries = [e for e in entries if e.is_paper]
    evals = {f.entry.label: f.evals for f in files}
    drift_only = entries_of(list(drift), noise, say) if drift and with_drift else []
    t0 = time.perf_counter()
    light = {
        f.entry.label: (f.entry, light_record(f.model, f.entry, settings, f.evals, use_cache))
        for f in files
        if light_cell(f.entry)
    }
    timings: dict[str, float] = {"light": time.perf_counter() - t0}
    if light:
        fresh = sum(not r.cached for _, r in light.values())
        say(
            f"{len(light)} light entries: {timings['light']:.1f} s" + (f" ({fresh} computed)" if fresh else " (cached)")
        )
    every = [*entries, *(e for e, _ in light.values())]
    unique_labels([*every, *drift_only, *family])
    jobs: dict = {("model", e.label): model_job(e, settings, use_cache, evals.get(e.label)) for e in entries}
    jobs |= {("family", e.label): family_job(e, settings, use_cache) for e in family}
    table1 = any(f.entry.is_paper for f in files)  # a directory of the paper's models: baselines of every column
    based = [*every, *(e for e in family if not e.quad)]  # the priors with baselines (a --quad run's task has none)
    for prior, (d, n, x_cov) in _task_sizes(based, table1).items():
        caches = cache_files([e for e in based if e.noise == prior]) or [Path(p) / CACHE_FILE for p in dirs]
        jobs[("baselines", prior)] = baseline_job(prior, settings, d, n, x_cov, caches, use_cache)
    for e in every:
        if (job := theorem51_job(e, settings, use_cache)) is not None:
            jobs[("theorem51", e.label)] = job
    drift_plan, reason = (
        drift_jobs([*entries, *drift_only], settings, use_cache) if with_drift else ({}, "skipped on request.")
    )
    jobs |= {("drift", *k): job for k, job in drift_plan.items()}
    todo = sum(isinstance(j, Pending) for j in jobs.values())
    say(
        f"{len(entries)} probed models" + (f", {len(family)} of the linear-attention family" if family else "")
        + f", {len(jobs) - todo} records cached, {todo} to measure in {workers} process(es)"
    )  # fmt: skip
    t0 = time.perf_counter()
    done = resolve(
        jobs, workers, on_done=lambda key: say(f"{' '.join(map(str, key))}: {time.perf_counter() - t0:.1f} s")
    )
    timings["measure"] = time.perf_counter() - t0
    say(f"measured in {timings['measure']:.1f} s")
    pick = lambda kind: {k[1] if len(k) == 2 else k[1:]: v for k, v in done.items() if k[0] == kind}  # noqa: E731
    return ReportData(
        entries,
        pick("model"),
        pick("baselines"),
        {e.label: training_curve(e) for e in [*entries, *drift_only]},
        drift_curves(pick("drift"), reason, say),
        settings,
        timings,
        [e for e, _ in light.values()],
        {e.label: r for e, r in light.values()},
        dirs if table1 else [],  # a directory of the paper's models (the Table 1 zoo), not one of the family's
        theorem51=pick("theorem51"),
        variants=variants_study(paths),
        drift_entries=drift_only,
        family=with_family_runs(family_study(paths), list(pick("family").values())),
        family_entries=family,
        family_records=pick("family"),
    )
