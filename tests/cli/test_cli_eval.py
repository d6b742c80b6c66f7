"""`interp eval`: tables, CSV / JSON, views, and one-line errors with exit status 2."""

import csv
import functools
import io
import json
import math

import pytest
import torch

from interp import tuning
from interp.checkpoints import save_checkpoint
from interp.cli import main
from interp.config import TrainConfig
from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.model import LinearTransformer
from interp.run import Run
from tests.helpers import run_cli, trained

torch.set_num_threads(1)
ETA = 1 / (31 + 25 / 3)  # the one-layer optimum on uniform:5 (von Oswald et al. 2023)
LAM = [[2.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 0.5]]  # an input covariance Λ, x ~ N(0, Λ), d = 3


@pytest.fixture
def ckpt(tmp_path):
    model = LinearTransformer.from_omegas(torch.tensor([[0.0, 0.0, -ETA, 0.0]]), d=10)
    path = tmp_path / "gd1.safetensors"
    save_checkpoint(path, model, step=7, noise="uniform:5", seed=0)
    return path


def run(argv, capsys):
    return run_cli(capsys, *argv)


def test_table_csv_and_json(ckpt, tmp_path, capsys):
    rc, out, err = run(
        ["eval", ckpt, "--n-seq", "3000", "--csv", tmp_path / "r.csv", "--json", tmp_path / "r.json"], capsys
    )
    assert rc == 0, err
    assert "constrr" in out and "bayes" in out and "0.3650" in out  # ConstRR's Table 1 value on uniform:5
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    names = [r["name"] for r in rows]
    assert names == ["gd1.safetensors", "ols", "constrr", "adarr", "tunedrr", "gd1", "bayes"]
    by = {r["name"]: r for r in rows}
    # the 2-head ω-form model has no Table 1 cell (the paper's models have one head); GD-1 ≈ the model
    assert by["gd1.safetensors"]["paper"] == "" and by["adarr"]["paper"] == "0.068"
    assert float(by["gd1.safetensors"]["mean"]) == pytest.approx(float(by["gd1"]["mean"]), abs=0.01)
    assert float(by["bayes"]["mean"]) <= float(by["tunedrr"]["mean"]) + 3 * float(by["tunedrr"]["stderr"])
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["noise"] == "uniform:5" and data["tuning"]["seed"] != data["seed"]
    assert {r["name"] for r in data["rows"]} == set(names)


def test_csv_to_stdout_same_seed_same_numbers(ckpt, capsys):
    argv = ["eval", ckpt, "--n-seq", "2000", "--baselines", "adarr", "--csv"]
    rc1, out1, _ = run(argv, capsys)
    rc2, out2, _ = run(argv, capsys)
    assert rc1 == rc2 == 0 and out1 == out2 and out1.startswith("view,name,noise")


def test_profile_and_layers_views(ckpt, capsys):
    rc, out, err = run(
        [
            "eval",
            ckpt,
            "--view",
            "profile",
            "--sigmas",
            "0,2",
            "--profile-seq",
            "500",
            "--baselines",
            "constrr,gd",
            "--noise",
            "categorical:1,3",
        ],
        capsys,
    )
    assert rc == 0, err
    head = out.splitlines()[1]
    assert head.split()[-2:] == ["0", "2"] and "σ" in head  # one column per requested σ
    # every cell is "mean ± s.e." (interp.render.loss), the sequence count in the heading
    assert "500 sequences each" in out.splitlines()[0]
    _, at0, pm0, se0, at2, pm2, se2 = next(line for line in out.splitlines() if line.startswith("constrr")).split()
    assert pm0 == pm2 == "±" and float(se0) > 0 and math.isfinite(float(se2))
    assert float(at0) > 0.01 and math.isfinite(float(at2))  # at σ = 0 the oracle is exact, ConstRR's λ > 0 is not
    rc, out, err = run(
        ["eval", ckpt, "--view", "layers", "--sigmas", "0:1:1", "--profile-seq", "500", "--n-seq", "1000", "--json"],
        capsys,
    )
    assert rc == 0, err
    rows = json.loads(out)["rows"]
    assert {r["layer"] for r in rows} == {0, 1} and {r["sigma"] for r in rows} == {None, 0.0, 1.0}


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--d", "5"], "d=10"),
        (["--noise", "gaussian:3"], "unknown noise prior"),
        (["--sigmas", "0:a"], "--sigmas"),
        (["--baselines", "lasso"], "--baselines"),
        (["--n-seq", "0"], "--n-seq"),
    ],
)
def test_bad_input_is_one_line_exit_2(ckpt, capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:  # argparse errors exit; library errors return 2
        code = main(["eval", str(ckpt), *argv])
        raise SystemExit(code)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and needle in err and "Traceback" not in err


def test_missing_and_corrupt_checkpoints(tmp_path, capsys):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint")
    for path in (tmp_path / "nope", bad):
        with pytest.raises(SystemExit) as exc:
            raise SystemExit(main(["eval", str(path)]))
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert str(path) in err and "\n" not in err


@pytest.fixture
def lam_run(tmp_path):
    """A DIAG run trained on x ~ N(0, Λ) (d = 3, n = 8, 20 steps)."""
    trained(tmp_path / "lam", "diag", "uniform:1", steps=20, d=3, n=8, batch=128, x_cov=LAM)
    return tmp_path / "lam"


@pytest.mark.slow
def test_a_run_trained_on_x_cov_is_evaluated_on_it(lam_run, tmp_path, capsys, monkeypatch):
    """A run trained on x ~ N(0, Λ): its row is interp.evaluate on EvalSet(x_cov=Λ), not on N(0, I), and GD-1 is
    tuned on Λ, where the optimal step is tr Λ² / ((n + 1) tr Λ³ + (tr Λ + E σ²) tr Λ²) (Wishart moments
    E XᵀX = nΛ, E (XᵀX)² = n(n + 1)Λ² + n tr(Λ) Λ; 1 / (n + d + 1 + E σ²) for Λ = I, von Oswald et al. 2023)."""
    monkeypatch.setattr(tuning, "tune_all", functools.partial(tuning.tune_all, n_seq=5_000))  # 50 000: minutes
    argv = ["eval", lam_run, "--n", "8", "--n-seq", "2000", "--baselines", "gd", "--json", tmp_path / "r.json"]
    rc, out, err = run(argv, capsys)
    assert rc == 0, err
    data = json.loads((tmp_path / "r.json").read_text())
    by = {r["name"]: r for r in data["rows"]}
    model = Run(lam_run).load()[0]
    on = lambda x_cov: EvalSet("uniform:1", d=3, n=8, n_seq=2000, seed=0, x_cov=x_cov)  # noqa: E731
    assert by["lam"]["mean"] == pytest.approx(adjusted_loss(model, on(LAM)).mean, rel=1e-12)
    assert by["lam"]["mean"] != pytest.approx(adjusted_loss(model, on(None)).mean, rel=1e-2)
    assert data["x_cov"] == LAM and data["tuning"]["x_cov"] == LAM and "x ~ N(0, a full 3×3 matrix)" in out
    tr = [torch.trace(torch.linalg.matrix_power(torch.tensor(LAM), k)).item() for k in range(4)]
    eta = data["predictors"]["gd1"]["params"]["eta"]
    assert eta == pytest.approx(tr[2] / (9 * tr[3] + (tr[1] + 1 / 3) * tr[2]), rel=0.15)  # 0.046; Λ = I: 0.081


@pytest.mark.slow
def test_runs_on_different_input_covariances_are_refused(lam_run, tmp_path, capsys):
    trained(tmp_path / "eye", "diag", "uniform:1", steps=2, d=3, n=8, batch=16)
    rc, _, err = run(["eval", lam_run, tmp_path / "eye", "--n", "8", "--no-baselines"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert (
        f"{lam_run} is trained on x ~ N(0, a full 3×3 matrix)" in err
        and f"{tmp_path / 'eye'} is trained on x ~ N(0, I)" in err
    )


def _run_dir(path, n: int, noise: str = "uniform:1", eta: float = 0.03, quad: float = 0.0):
    """A run directory (written by hand, no training) of a one-layer GD-η model, d = 3, trained by its config with
    context length n on `noise`."""
    model = LinearTransformer.from_omegas(torch.tensor([[0.0, 0.0, -eta, 0.0]]), d=3)
    run = Run(path)
    run.path.mkdir()
    run.write_config(TrainConfig(model=model.cfg, noise=noise, n=n, steps=10, quad=quad))
    run.save_checkpoint(model, 10, noise=noise, seed=0)
    return run.path, model


def test_a_run_on_the_quadratic_task_is_scored_on_its_own_task(tmp_path, capsys):
    """A --quad run is scored on its own task (labels + c·(x(1)² − 1), the adjusted loss's oracle the linear ridge),
    without a paper value; beside a run on the paper's task it is refused in one line (one evaluation, one task)."""
    path, model = _run_dir(tmp_path / "q", n=20, quad=0.5)
    on = lambda quad: adjusted_loss(model, EvalSet("uniform:1", d=3, n=20, n_seq=300, seed=0, quad=quad)).mean  # noqa: E731
    rc, out, err = run(["eval", path, "--n-seq", "300", "--no-baselines", "--json", tmp_path / "q.json"], capsys)
    assert rc == 0, err
    data = json.loads((tmp_path / "q.json").read_text())
    assert data["quad"] == 0.5 and data["predictors"]["q"]["paper"] is None
    assert data["rows"][0]["mean"] == pytest.approx(on(0.5), rel=1e-12)
    assert on(0.5) != pytest.approx(on(0.0), rel=0.1)  # not the paper task's number
    assert "quadratic task: labels + 0.5·(x(1)² − 1)" in out
    linear, _ = _run_dir(tmp_path / "lin", n=20)
    rc, out, err = run(["eval", path, linear, "--n-seq", "100", "--no-baselines"], capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"{path} is trained on the quadratic task (--quad 0.5), {linear} is trained on the paper's task" in err


def test_a_run_is_evaluated_on_its_own_n_unless_n_is_given(tmp_path, capsys):
    path, model = _run_dir(tmp_path / "n40", n=40)
    on = lambda n: adjusted_loss(model, EvalSet("uniform:1", d=3, n=n, n_seq=500, seed=0)).mean  # noqa: E731
    rc, out, err = run(["eval", path, "--n-seq", "500", "--no-baselines", "--json", tmp_path / "r.json"], capsys)
    assert rc == 0, err
    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["noise"], data["d"], data["n"]) == ("uniform:1", 3, 40) and "(d=3, n=40, seed=0)" in out
    assert data["rows"][0]["mean"] == pytest.approx(on(40), rel=1e-12) and on(40) != pytest.approx(on(20), rel=1e-3)
    rc, out, err = run(["eval", path, "--n", "20", "--n-seq", "500", "--no-baselines", "--csv"], capsys)
    assert rc == 0, err
    [row] = csv.DictReader(io.StringIO(out))
    assert row["n"] == "20" and float(row["mean"]) == pytest.approx(on(20), rel=1e-12)


def test_models_trained_on_different_n_or_priors_need_the_flag(tmp_path, capsys):
    a, _ = _run_dir(tmp_path / "a", n=40)
    b, _ = _run_dir(tmp_path / "b", n=20)
    c, _ = _run_dir(tmp_path / "c", n=40, noise="categorical:1,3")
    for argv, needles in (
        ([a, b], [f"{a} is trained on n=40", f"{b} is trained on n=20", "--n"]),
        ([a, c], [f"{a} is trained on uniform:1", f"{c} is trained on categorical:1,3", "--noise"]),
    ):
        rc, _, err = run(["eval", *argv, "--no-baselines", "--n-seq", "200"], capsys)
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
        assert all(needle in err for needle in needles), err
    rc, out, err = run(["eval", a, b, "--n", "30", "--no-baselines", "--n-seq", "200", "--json"], capsys)
    assert rc == 0 and json.loads(out)["n"] == 30, err
    loose = tmp_path / "loose.safetensors"  # records its prior, not its n: evaluated beside the run, at its n
    loose.write_bytes(Run(a).last_checkpoint().read_bytes())
    rc, out, err = run(["eval", a, loose, "--no-baselines", "--n-seq", "200", "--json"], capsys)
    assert rc == 0 and json.loads(out)["n"] == 40, err


@pytest.mark.parametrize("attention, mlp, label", [("retnet", "none", "retnet"), ("lsa", "relu", "FULL+relu FFN")])
def test_a_family_model_is_named_by_its_variant_and_has_no_paper_value(tmp_path, capsys, attention, mlp, label):
    """A model of the linear-attention family is written as what it is, never as the paper's FULL, and gets no Table 1
    value (Table 1 has the paper's models only); the paper's FULL of the same depth beside it keeps its value."""
    from interp.config import ModelConfig
    from interp.variants import build

    variant = build(
        ModelConfig(d=10, n_layers=2, attention=attention, mlp=mlp), generator=torch.Generator().manual_seed(0)
    )
    full = LinearTransformer(ModelConfig(d=10, n_layers=2))
    for name, model in (("variant", variant), ("full", full)):
        save_checkpoint(tmp_path / f"{name}.safetensors", model, step=1, noise="uniform:5", seed=0)
    paths = [tmp_path / "variant.safetensors", tmp_path / "full.safetensors"]
    rc, out, err = run(["eval", *paths, "--n-seq", "200", "--no-baselines", "--json", tmp_path / "r.json"], capsys)
    assert rc == 0, err
    info = json.loads((tmp_path / "r.json").read_text())["predictors"]
    assert info["variant.safetensors"]["paper"] is None and info["full.safetensors"]["paper"] == pytest.approx(0.245)
    row = lambda name: next(line for line in out.splitlines() if line.startswith(name))  # noqa: E731
    assert f" {label} L=2 " in row("variant.safetensors") and " FULL L=2 " in row("full.safetensors")
