"""interp table: baselines on the models' own sequences, ± and counts everywhere, one value per tuned parameter,
--quick as a preview, required config fields and checkpoints checked against their config, the shared cache."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
from helpers import run_cli

from interp.config import ModelConfig, TrainConfig
from interp.evalset import EvalSet
from interp.evaluate import evaluate
from interp.run import Run
from interp.table import _cell, table1
from interp.train import train
from interp.tuning import baselines, format_param, tuned

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    """Two tiny complete Table 1 runs (d = 10, n = 20) of two cells."""
    root = tmp_path_factory.mktemp("table") / "root"
    for arch in ("diag", "gdpp"):
        cfg = TrainConfig(
            model=ModelConfig(n_layers=1, param=arch), noise="uniform:5", steps=4, batch=64, n_checkpoints=2
        )
        train(cfg, root / f"{arch}1", progress=False)
    return root


def copy_of(zoo: Path, tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(zoo, root)
    return root


def test_baselines_on_the_models_own_sequences_with_errors_and_counts(zoo, tmp_path):
    logs = []
    text, data = table1([zoo], n_seq=1000, cache=tmp_path / "c.json", log=logs.append)
    on = EvalSet("uniform:5", n_seq=1000, seed=0)
    want = evaluate(baselines("uniform:5", names=["constrr", "adarr", "tunedrr", "bayes"]), on)
    for name, est in want.items():
        assert data["baselines"]["uniform:5"][name] == est.to_dict()  # the same 1000 sequences as the models
    assert data["n_seq"] == 1000 and data["cells"]["diag1|uniform:5"]["n_seq"] == 1000
    assert "1000 sequences of evaluation seed 0 per model and per baseline" in text
    rows = [line for line in text.splitlines() if line.startswith("| 1 |") or line.startswith("| – |")]
    assert len(rows) == 6 and all(" ± " in row for row in rows)  # every printed loss carries its error
    assert "seq.)" not in text and "baselines_other" not in data  # no rows on other sequences unless asked
    text, data = table1([zoo], n_seq=1000, baseline_seq=2000, cache=tmp_path / "c.json", log=logs.append)
    assert "| – | ConstRR (2000 seq.) |" in text and data["baselines_other"]["n_seq"] == 2000
    lam = format_param(tuned("uniform:5")["constrr"]["lam"])
    assert (
        f"| uniform:5 | {lam} |" in text
        and data["baseline_params"]["uniform:5"]["constrr"]["lam"] == tuned("uniform:5")["constrr"]["lam"]
    )


def test_a_tuned_parameter_has_one_value_in_eval_and_table(zoo, tmp_path, capsys):
    code, out, err = run_cli(capsys, "eval", "--noise", "uniform:5", "--n-seq", "200", "--baselines", "constrr,tunedrr")
    assert code == 0, err
    rec = tuned("uniform:5")
    lam, mult, clip = (format_param(v) for v in (rec["constrr"]["lam"], rec["tunedrr"]["mult"], rec["tunedrr"]["clip"]))
    assert f"lam={lam}" in out and f"mult={mult}" in out and f"clip={clip}" in out
    code, out, err = run_cli(capsys, "table", zoo, "--n-seq", "200", "--cache", tmp_path / "c.json")
    assert code == 0, err
    assert f"| uniform:5 | {lam} | {mult} | {clip} |" in out


def test_quick_is_a_preview_and_marks_nothing_its_noise_cannot_support(zoo, tmp_path, capsys):
    argv = ["table", zoo, "--quick", "--cache", tmp_path / "c.json", "--json", tmp_path / "t.json"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "preview (--quick): 10000 sequences" in out
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["preview"] is True and data["n_seq"] == 10_000
    assert _cell(0.08, 0.068, stderr=0.01).endswith("○")  # s.e. above 10% of the value: no ✓ / ✗
    assert _cell(0.08, 0.068, stderr=0.001).endswith("✗") and _cell(0.07, 0.068, stderr=0.001).endswith("✓")
    assert _cell(0.08, None, stderr=0.01) == "0.08 ± 0.01"


def test_a_config_missing_a_field_is_skipped_not_defaulted(zoo, tmp_path):
    root = copy_of(zoo, tmp_path)
    path = Run(root / "gdpp1").config_path
    raw = json.loads(path.read_text())
    del raw["noise"]  # would read as the default uniform:5
    path.write_text(json.dumps(raw))
    logs = []
    _, data = table1([root], n_seq=200, cache=tmp_path / "c.json", log=logs.append)
    assert [Path(r["run"]).name for r in data["runs"]] == ["diag1"]
    (note,) = [line for line in logs if "gdpp1" in line]
    assert str(path) in note and "has no noise" in note and "no default" in note


def test_a_family_run_or_one_on_the_quadratic_task_is_never_a_table_1_cell(zoo, tmp_path):
    """A RetNet and a FULL trained with --quad have param full, d = 10 and n = 20 like a FULL cell: each is skipped with
    a line saying why, never tabulated as FULL."""
    root = copy_of(zoo, tmp_path)
    for name, attention, quad in (("retnet1", "retnet", 0.0), ("quad1", "lsa", 1.0)):
        cfg = TrainConfig(
            model=ModelConfig(n_layers=1, attention=attention), noise="uniform:1", steps=2, batch=16, quad=quad
        )
        train(cfg, root / name, progress=False)
    logs = []
    _, data = table1([root], n_seq=200, cache=tmp_path / "c.json", log=logs.append)
    assert sorted(Path(r["run"]).name for r in data["runs"]) == ["diag1", "gdpp1"]
    assert any("retnet1: a retnet model, not the paper's" in line for line in logs), logs
    assert any("quad1: trained on the quadratic task (--quad 1)" in line for line in logs), logs


def test_a_checkpoint_that_disagrees_with_its_config_is_skipped(zoo, tmp_path):
    root = copy_of(zoo, tmp_path)
    path = Run(root / "diag1").config_path
    raw = json.loads(path.read_text())
    raw["noise"], raw["seed"] = "uniform:1", 3  # the checkpoints say uniform:5, seed 0
    path.write_text(json.dumps(raw))
    logs = []
    _, data = table1([root], n_seq=200, cache=tmp_path / "c.json", log=logs.append)
    assert [Path(r["run"]).name for r in data["runs"]] == ["gdpp1"]
    (note,) = [line for line in logs if "diag1" in line]
    assert "step_" in note and "noise 'uniform:5' where config.json says 'uniform:1'" in note and "seed 0" in note


def test_a_copied_run_with_a_new_mtime_hits_the_table_cache(zoo, tmp_path):
    cache = tmp_path / "c.json"
    logs = []
    _, first = table1([zoo], n_seq=300, cache=cache, log=logs.append)
    assert sum(line.startswith(str(zoo)) for line in logs) == 2  # both runs evaluated
    root = tmp_path / "elsewhere"
    shutil.copytree(zoo, root)
    for run in Run.find(root):
        for _, ckpt in run.checkpoints():
            os.utime(ckpt, (2e9, 2e9))
    logs = []
    _, again = table1([root], n_seq=300, cache=cache, log=logs.append)
    assert logs == []  # nothing evaluated: models and baselines hit
    where = lambda cells: {k: c.pop("run") for k, c in cells.items()}  # noqa: E731
    assert set(where(again["cells"]).values()) == {str(root / "diag1"), str(root / "gdpp1")}  # the copy's runs
    assert set(where(first["cells"]).values()) == {str(zoo / "diag1"), str(zoo / "gdpp1")}
    assert again["cells"] == first["cells"] and again["baselines"] == first["baselines"]  # its numbers: the cache's


def test_a_cache_that_is_not_one_is_a_one_line_error(zoo, tmp_path, capsys):
    bad = tmp_path / "c.json"
    bad.write_text("[]")
    code, _, err = run_cli(capsys, "table", zoo, "--n-seq", "100", "--cache", bad)
    assert code == 2 and err.count("\n") == 1 and str(bad) in err


def test_an_edited_cache_value_is_not_printed(zoo, tmp_path):
    cache = tmp_path / "c.json"
    _, first = table1([zoo], n_seq=200, cache=cache, log=lambda text: None)
    stored = json.loads(cache.read_text())
    for entry in stored["entries"].values():
        entry["value"]["mean"] = -1.0
    cache.write_text(json.dumps(stored))
    logs = []
    text, again = table1([zoo], n_seq=200, cache=cache, log=logs.append)
    printed = text.replace(str(zoo), "")  # (tmp paths hold "-1")
    assert again["cells"] == first["cells"] and not re.search(r"(?<![0-9e])-1(?![0-9])", printed)  # (1e-10 may show)
    assert any("warning" in line and str(cache) in line and "check" in line for line in logs)


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory) -> Path:
    """Two seeds of one tiny Table 1 cell (DIAG, one layer, uniform:5)."""
    root = tmp_path_factory.mktemp("seeds") / "root"
    for seed in (0, 1):
        cfg = TrainConfig(
            model=ModelConfig(n_layers=1, param="diag"),
            noise="uniform:5",
            steps=4,
            batch=64,
            n_checkpoints=2,
            seed=seed,
        )
        train(cfg, root / f"diag1_s{seed}", progress=False)
    return root


def test_confirm_reports_the_seed_chosen_on_one_sample_on_another(two_seeds, tmp_path):
    cache = tmp_path / "c.json"
    _, chosen = table1([two_seeds], n_seq=300, cache=cache, log=lambda text: None)
    text, data = table1([two_seeds], n_seq=300, confirm_seq=700, cache=cache, log=lambda text: None)
    cell, pick = data["cells"]["diag1|uniform:5"], chosen["cells"]["diag1|uniform:5"]
    assert cell["best_seed"] == pick["best_seed"] and cell["seed_means"] == pick["seed_means"]  # chosen on seed 0's
    chosen_on = EvalSet("uniform:5", n_seq=300, seed=0)
    for seed, mean in pick["seed_means"]:  # the two seeds, evaluated together on one draw: each as if alone
        alone = evaluate({"m": Run(two_seeds / f"diag1_s{seed}").load()[0]}, chosen_on)["m"]
        assert mean == alone.mean
    model = Run(two_seeds / f"diag1_s{pick['best_seed']}").load()[0]
    other = EvalSet("uniform:5", n_seq=700, seed=1)  # the confirmation: eval seed + 1
    assert {k: cell[k] for k in ("mean", "stderr", "n_seq", "median", "worst")} == evaluate({"m": model}, other)[
        "m"
    ].to_dict()
    assert cell["selection"]["mean"] == pick["mean"] and cell["selection"]["n_seq"] == 300
    assert cell["ratio"] == cell["mean"] / cell["paper"]  # the aims read the confirmation
    want = evaluate(baselines("uniform:5", names=["constrr", "adarr", "tunedrr", "bayes"]), other)
    assert data["baselines"]["uniform:5"] == {k: v.to_dict() for k, v in want.items()}
    assert data["baselines_selection"] == chosen["baselines"] and data["confirm"] == {"n_seq": 700, "eval_seed": 1}
    assert "chosen on 300 sequences of evaluation seed 0" in text and "on 700 other sequences" in text


def test_a_confirmation_on_the_choices_own_seed_is_a_one_line_error(two_seeds, tmp_path, capsys):
    code, _, err = run_cli(
        capsys,
        "table",
        two_seeds,
        "--n-seq",
        "100",
        "--confirm-seq",
        "200",
        "--confirm-seed",
        "0",
        "--cache",
        tmp_path / "c.json",
    )
    assert code == 2 and err.count("\n") == 1 and "--confirm-seed" in err and not (tmp_path / "c.json").exists()


def test_each_run_names_the_machine_that_trained_it(zoo, tmp_path):
    """The JSON names each run's training path and CPU from its machine record, the text counts them; a run with no
    record (trained before interp kept one) or resumed elsewhere is said to be so; a torn record is logged, not
    fatal."""
    root = copy_of(zoo, tmp_path)
    seg = Run(root / "diag1").trained_on()[0]
    here = f"{seg['path']} on {seg['cpu']} ({seg['cpu_capability']})"
    # resumed at step 2 on another CPU: one whose build differs from this machine's, whichever this one is
    wide = seg["cpu_capability"] != "AVX512"
    other = {**seg, "step": 2, "path": "kernel avx512" if wide else "kernel avx2"}
    other["cpu_capability"] = "AVX512" if wide else "AVX2"
    with open(Run(root / "diag1").trained_on_path, "a") as f:
        f.write(json.dumps(other) + "\n")
    os.remove(Run(root / "gdpp1").trained_on_path)
    logs = []
    text, data = table1([root], n_seq=200, cache=tmp_path / "c.json", log=logs.append)
    by_run = {Path(r["run"]).name: r["trained_on"] for r in data["runs"]}
    elsewhere = f"{other['path']} on {seg['cpu']} ({other['cpu_capability']})"
    assert elsewhere != here and by_run == {"diag1": [here, elsewhere], "gdpp1": []}
    section = text.split("### Where the runs were trained\n\n")[1]
    assert (
        f"- {here}: 1 run\n" in section
        and "- no record (trained before interp recorded the machine): 1 run\n" in section
    )
    assert f"(not reproducible bit for bit): {root / 'diag1'}" in section
    Run(root / "gdpp1").trained_on_path.write_text("{torn")
    _, data = table1([root], n_seq=200, cache=tmp_path / "c.json", log=logs.append)
    assert {Path(r["run"]).name: r["trained_on"] for r in data["runs"]}["gdpp1"] == []
    assert any("trained_on.jsonl: line 1 is not a segment" in line and "without its machine" in line for line in logs)
