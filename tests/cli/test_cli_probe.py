"""`interp probe`: the JSON it writes, the table it prints, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from interp.checkpoints import save_checkpoint
from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.model import LinearTransformer
from interp.probes import as_float64
from interp.run import Run
from tests.helpers import run_cli, trained

OMEGA = [[-0.01, -0.002, -0.03, -0.001], [0.0, 0.0, -0.05, -0.0005]]


@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "diag2.safetensors"
    save_checkpoint(
        path, LinearTransformer.from_omegas(torch.tensor(OMEGA, dtype=torch.float64), d=10), step=7, noise="uniform:2"
    )
    return path


def probe(args, capsys):
    return run_cli(capsys, "probe", *args)


def test_probe_writes_schema_and_table(ckpt, tmp_path, capsys):
    out = tmp_path / "probe.json"
    code, stdout, _ = probe([ckpt, "--n-seq", 600, "--chunk", 250, "--ablation-seq", 500, "--out", out], capsys)
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "interp-probe" and doc["format_version"] == 1 and doc["command"][:2] == ["interp", "probe"]
    (rec,) = doc["models"]
    assert rec["step"] == 7 and rec["noise"] == "uniform:2" and rec["param"] == "diag" and rec["n_layers"] == 2
    for key in (
        "implicit",
        "solvers",
        "implied_lambda",
        "omegas",
        "lemma44",
        "momentum",
        "rescaling",
        "effective_step",
        "fits",
        "projection",
        "const_ridge",
        "ablation",
        "schedule",
    ):
        assert key in rec, key
    assert max(rec["implicit"]["lstsq_vs_recursion"]) < 1e-8 and max(rec["lemma44"]["recursion_error"]) < 1e-10
    assert len(rec["solvers"]["cos_ols"]) == 3 and rec["solvers"]["cos_ols"][0] is None  # w⁰ = 0
    assert all(abs(a - b) < 1e-12 for row, ref in zip(rec["omegas"]["omega"], OMEGA) for a, b in zip(row, ref))
    assert all(r > 1 - 1e-12 for r in rec["fits"]["diag"]["r2"])
    assert abs(rec["ablation"]["delta_all"]) < 1e-10
    assert len(rec["implied_lambda"]["median_by_sigma"][1]) == 8
    assert "DIAG R²" in stdout and "wrote" in stdout and len(stdout.splitlines()) >= 5
    sched = rec["schedule"]
    assert sched["blocks"] == ["x<-x", "x<-y", "y<-x", "y<-y"] and len(sched["relative"]) == 2
    assert sched["ablation_seq"] == 500 and sched["n_seq"] == 600 and len(sched["labels"]) == 2
    assert sched["labels"][1] == "y-step" and sched["increase"][1][:2] == [0.0, 0.0]  # the last x's are never read
    assert abs(sched["base"] - rec["ablation"]["base"]) < 1e-12  # the same sequences as the DIAG ablation
    assert "layer schedule (§5.3)" in stdout and "schedule: " in stdout and "label" in stdout


def test_numbers_agree_with_interp_eval(ckpt, tmp_path, capsys):
    """ConstRR's λ is interp.tuning's in the probe's JSON and table, as interp eval prints it; every loss the probe
    prints carries its standard error and its sequences (the ablation's: seed + 1, not interp eval's)."""
    from interp import tuning

    out = tmp_path / "probe.json"
    code, stdout, err = probe(
        [ckpt, "--probe-seq", 300, "--ablation-seq", 800, "--eval-seed", 3, "--json", out], capsys
    )
    assert code == 0, err
    (rec,) = json.loads(out.read_text())["models"]
    lam = tuning.tuned("uniform:2")["constrr"]["lam"]
    assert rec["const_ridge"]["lambda_constrr"] == lam and f"ConstRR λ {tuning.format_param(lam)} " in stdout
    code, evaluated, err = run_cli(
        capsys, "eval", "--noise", "uniform:2", "--eval-seq", "100", "--baselines", "constrr"
    )
    assert code == 0 and f"lam={tuning.format_param(lam)}" in evaluated, err
    abl = rec["ablation"]
    assert abl["n_seq"] == 800 and abl["seed"] == 4 and abl["base_stderr"] > 0 and abl["delta_all_stderr"] < 1e-9
    line = next(ln for ln in stdout.splitlines() if ln.startswith("DIAG ablation"))
    assert "800 sequences of seed 4 (not interp eval's)" in line and line.count(" ± ") == 3
    assert f"{abl['base']:.4g} ± " in line
    sched = next(ln for ln in stdout.splitlines() if ln.startswith("Δ = "))
    assert "base " in sched and " ± " in sched and "(800 seq.)" in sched


def test_probe_noise_override_and_two_checkpoints(ckpt, tmp_path, capsys):
    out = tmp_path / "p.json"
    code, _, _ = probe(
        [ckpt, ckpt, "--noise", "categorical:1,3", "--n-seq", 300, "--ablation-seq", 0, "--out", out], capsys
    )
    doc = json.loads(out.read_text())
    assert code == 0 and len(doc["models"]) == 2 and "ablation" not in doc["models"][0]
    assert "labels" not in doc["models"][0]["schedule"] and len(doc["models"][0]["schedule"]["relative"]) == 2
    assert doc["models"][0]["noise"] == "categorical:1,3" and doc["models"][0]["implied_lambda"]["sigma"] == [1.0, 3.0]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["missing.safetensors"], "missing.safetensors"),
        (["{ckpt}", "--n-seq", "0"], "--n-seq"),
        (["{ckpt}", "--noise", "gauss:1"], "gauss"),
        (["{ckpt}", "--ablation-seq", "-1"], "--ablation-seq"),
        (["{bad}"], "bad.safetensors"),
        (["{ckpt}", "--n", "5"], "--n"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle, ckpt, tmp_path, capsys):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint")
    args = [a.format(ckpt=ckpt, bad=bad) for a in args] + ["--out", str(tmp_path / "o.json")]
    code, _, err = probe(args, capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_out_directory_must_exist(ckpt, tmp_path, capsys):
    code, _, err = probe([ckpt, "--out", tmp_path / "nope" / "p.json"], capsys)
    assert code == 2 and "--out" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_probe_subprocess(ckpt, tmp_path):
    out = tmp_path / "p.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "interp.cli",
            "probe",
            str(ckpt),
            "--n-seq",
            "200",
            "--ablation-seq",
            "200",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(out.read_text())["models"][0]["n_layers"] == 2
    bad = subprocess.run(
        [sys.executable, "-m", "interp.cli", "probe", str(tmp_path / "x"), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_a_run_trained_on_x_cov_is_probed_on_it(tmp_path, capsys):
    """A run trained on x ~ N(0, Λ) is probed on such inputs: the ablation's base loss is the model's adjusted loss on
    EvalSet(x_cov=Λ) of seed + 1 (not on N(0, I)), and the JSON records Λ beside the run's n."""
    lam = [[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]]
    trained(tmp_path / "lam", "diag", "uniform:1", steps=10, d=3, n=8, batch=64, x_cov=lam)
    out = tmp_path / "p.json"
    code, stdout, err = probe(
        [tmp_path / "lam", "--n-seq", 300, "--fit-seq", 256, "--ablation-seq", 1000, "--out", out], capsys
    )
    assert code == 0, err
    (rec,) = json.loads(out.read_text())["models"]
    assert rec["x_cov"] == lam and rec["n"] == 8 and "x ~ N(0, diag:2,1,0.5)" in stdout
    model = as_float64(Run(tmp_path / "lam").load()[0])
    on = lambda x_cov: EvalSet("uniform:1", d=3, n=8, n_seq=1000, seed=1, x_cov=x_cov)  # noqa: E731
    assert rec["ablation"]["base"] == pytest.approx(adjusted_loss(model, on(lam)).mean, rel=1e-9)
    assert rec["ablation"]["base"] != pytest.approx(adjusted_loss(model, on(None)).mean, rel=1e-2)


def test_probe_adds_theorem51_for_gdpp_on_a_noise_free_prior(tmp_path, capsys):
    """GD++ on uniform:0: a "theorem51" section (docs/probe_schema.md) and its table; on uniform:2, or a DIAG model
    with ω_xy ≠ 0 (the fixture's), none."""
    gdpp = tmp_path / "gdpp2.safetensors"
    om = torch.tensor([[-0.02, 0.0, -0.03, 0.0], [-0.01, 0.0, -0.05, 0.0]], dtype=torch.float64)
    save_checkpoint(gdpp, LinearTransformer.from_omegas(om, d=10), step=3, noise="uniform:0")
    out = tmp_path / "probe.json"
    code, stdout, _ = probe([gdpp, "--n-seq", 300, "--fit-seq", 128, "--ablation-seq", 0, "--out", out], capsys)
    assert code == 0 and "Theorem 5.1" in stdout and "fitted order" in stdout
    t = json.loads(out.read_text())["models"][0]["theorem51"]
    assert t["n_seq"] == t["probe_seq"] == 300 and len(t["loss"]) == 3 and len(t["order"]) == 2
    assert (
        t["preconditioning"]["gamma"] == pytest.approx([0.02, 0.01]) and max(t["preconditioning"]["map_error"]) < 1e-12
    )
    assert len(t["before"]) == 2 and len(t["before"][0]) == 16 and len(t["before"][0][0]) == 10
    args = ["--n-seq", 300, "--fit-seq", 128, "--ablation-seq", 0, "--out", out]
    assert probe([gdpp, "--noise", "uniform:2", *args], capsys)[0] == 0
    assert "theorem51" not in json.loads(out.read_text())["models"][0]
