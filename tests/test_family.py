"""The family study's pieces: the grid file (experiments/family_grid.toml, with the sweep's skip overrides), the
quadratic task, and a tiny sweep of the family end to end."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
import torch

from interp.config import ModelConfig, TrainConfig
from interp.model import LinearTransformer
from interp.presets import resolve
from interp.records import rounded
from interp.sweep.grid import SweepError, expand, load_grid_file
from interp.tasks import sample_tasks

ROOT = Path(__file__).resolve().parent.parent
GRID = ROOT / "experiments" / "family_grid.toml"


def test_the_family_grid_plans_every_variant_with_fulls_budget():
    specs = expand(*load_grid_file(GRID))
    assert not [s.error for s in specs if s.error]
    cells = collections.Counter((s.options["attention"], s.options["mlp"], s.options["quad"]) for s in specs)
    linear = cells.pop(("lsa", "linear", 0.0))  # the ReLU FFN's control: 2 and 4 layers, 2 priors × 3 seeds
    assert linear == 12 and {s.options["layers"] for s in specs if s.options["mlp"] == "linear"} == {2, 4}
    near_full7 = cells.pop(("qkv", "none", 0.0))  # within 10% of FULL-7 at seed 0 (variants.md): 3 seeds at 7 too
    assert near_full7 == 18
    relu = cells.pop(("lsa", "relu", 0.0))  # within 10% of FULL-7 on uniform:5 only: 3 seeds at 7 there
    assert relu == 16
    assert len(cells) == 11 and set(cells.values()) == {14}  # 2 priors × (3 seeds at 2 and 4 layers + 1 at 7)
    assert ("lsa", "none", 0.0) not in cells and ("qkv", "quadratic", 0.0) not in cells
    assert {c for c in cells if c[2]} == {("lsa", m, 1.0) for m in ("none", "relu", "quadratic")}
    seeds7 = collections.defaultdict(set)  # (attention, mlp, quad, prior) -> its seeds at 7 layers
    for s in specs:
        if s.options["layers"] == 7:
            seeds7[s.options["attention"], s.options["mlp"], s.options["quad"], s.options["noise"]].add(
                s.options["seed"]
            )
    three = {cell for cell, seeds in seeds7.items() if seeds == {0, 1, 2}}
    assert three == {("qkv", "none", 0.0, p) for p in ("uniform:5", "categorical:1,3")} | {
        ("lsa", "relu", 0.0, "uniform:5")
    }
    assert all(seeds == {0} for cell, seeds in seeds7.items() if cell not in three)
    assert len(specs) == 200
    for s in specs:  # the fast preset's steps and peak lr of FULL at that depth
        want = resolve(TrainConfig(model=ModelConfig(n_layers=s.cfg.model.n_layers), noise=s.cfg.noise))
        got = resolve(s.cfg)
        assert (got.steps, got.lr, got.stress) == (want.steps, want.lr, want.stress), s.name


def test_skip_overrides_match_lists_and_refuse_options_beside_them():
    specs = expand({"layers": [2, 4], "seed": [0, 1]}, [{"where": {"layers": 4, "seed": [1]}, "skip": True}])
    assert sorted((s.options["layers"], s.options["seed"]) for s in specs) == [(2, 0), (2, 1), (4, 0)]
    with pytest.raises(SweepError, match="skip"):
        expand({"layers": [2]}, [{"where": {"layers": 2}, "skip": True, "lr": 0.1}])


def test_the_quadratic_task_adds_c_x1_squared_minus_one_to_every_label():
    g = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    plain, quad = sample_tasks(64, 3, 5, "uniform:1", g()), sample_tasks(64, 3, 5, "uniform:1", g(), quad=0.5)
    torch.testing.assert_close(quad.y - plain.y, 0.5 * (plain.x[..., 0] ** 2 - 1), rtol=0, atol=1e-6)
    torch.testing.assert_close(quad.target - plain.target, 0.5 * (plain.x_query[:, 0] ** 2 - 1), rtol=0, atol=1e-6)
    assert torch.equal(quad.tokens[:, -1, -1], torch.zeros(64))  # the query's label stays masked
    assert "quad" not in TrainConfig().to_dict() and TrainConfig(quad=0.5).to_dict()["quad"] == 0.5


def test_the_family_script_measures_a_tiny_grid_end_to_end(tmp_path, capsys):
    """Two tiny runs of the sweep (a RetNet on the paper's task, FULL + quadratic FFN on the quadratic one), then
    experiments/family.py: one cell each, the best seed exported, the readout exact on the RetNet."""
    from interp import load
    from interp.cli import main
    from interp.evalset import EvalSet
    from interp.evaluate import adjusted_loss, per_layer_loss
    from interp.probes.readout import readout_summary
    from tests.helpers import experiment_script

    grid = tmp_path / "grid.toml"
    grid.write_text(
        'arch = "full"\nlayers = 2\nbatch = 16\nsteps = 4\nnoise = "uniform:5"\nseeds = [0]\ncheckpoints = 2\n'
        'attention = ["retnet", "lsa"]\nmlp = ["none", "quadratic"]\nquad = [0.0, 1.0]\n'
        '[[override]]\nwhere = { attention = "retnet", mlp = "quadratic" }\nskip = true\n'
        '[[override]]\nwhere = { attention = "retnet", quad = 1.0 }\nskip = true\n'
        '[[override]]\nwhere = { attention = "lsa", mlp = "none" }\nskip = true\n'
        '[[override]]\nwhere = { attention = "lsa", quad = 0.0 }\nskip = true\n'
    )
    root = tmp_path / "root"
    assert main(["sweep", "--root", str(root), "--grid", str(grid), "--threads", "1", "--no-progress"]) == 0
    family = experiment_script("family")
    out = tmp_path / "out"
    family.main(["--root", str(root), "--eval-seq", "500", "--out", str(out), "--zoo", str(tmp_path / "zoo")])
    doc = json.loads((out / "variants.json").read_text())
    assert doc == rounded(doc, family.JSON_DIGITS)  # 12 significant digits: a rerun does not rewrite the last bits
    cells = {c["variant"]: c for c in doc["cells"]}
    assert set(cells) == {"retnet", "lsa_quadratic_quad1"}
    assert cells["retnet"]["ratio_to_bayes"] > 1 and cells["lsa_quadratic_quad1"]["ratio_to_bayes"] is None
    assert max(cells["retnet"]["readout_gap_median"]) < 1e-6 and "token_weights" in cells["retnet"]
    assert (tmp_path / "zoo" / "uniform5" / "retnet2.safetensors").is_file()
    by_sigma = cells["retnet"]["vs_full_by_sigma"]  # paired against the zoo's FULL-2 within 4 σ groups
    sizes = [e["n_seq"] for e in by_sigma["diff"]]
    assert len(by_sigma["sigma"]) == 4 and sum(sizes) == 500
    overall = sum(n * e["mean"] for n, e in zip(sizes, by_sigma["diff"])) / 500
    assert overall == pytest.approx(cells["retnet"]["vs_full"]["mean"], rel=1e-9)
    # one seed against FULL of one seed: the Table 1 grid's FULL-2 seed 0, evaluated apart on the same sequences
    even = cells["retnet"]["full_same_seeds"]
    assert even["runs"] == ["full2_uniform5_s0"] and even["best"] == "full2_uniform5_s0"
    on_paper = EvalSet("uniform:5", n_seq=500, seed=0)
    full_s0 = adjusted_loss(load(family.TABLE1_GRID / "full2_uniform5_s0"), on_paper).mean
    assert even["loss"]["mean"] == pytest.approx(full_s0, rel=1e-9)
    want = cells["retnet"]["loss"]["mean"] - full_s0  # a paired mean is the difference of the means
    assert cells["retnet"]["vs_full_same_seeds"]["mean"] == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert "full_same_seeds" not in cells["lsa_quadratic_quad1"]  # its own task: FULL of the paper's is no pair
    # the noise-free floor: at σ = 0 the oracle ridge is least squares, exact on n > d tokens, so the adjusted loss
    # is the model's own ½ MSE on the noiseless labels, computed here from its forward
    clean, exported = cells["retnet"]["noise_free"], load(tmp_path / "zoo" / "uniform5" / "retnet2.safetensors")
    half_mse = [
        0.5 * (exported(b.tokens.to(exported.cfg.torch_dtype)).double() - b.target) ** 2
        for b in on_paper.at_sigma(0.0).batches()
    ]
    assert clean["loss"]["mean"] == pytest.approx(torch.cat(half_mse).mean().item(), rel=1e-6)
    assert clean["vs_full"]["mean"] == pytest.approx(clean["loss"]["mean"] - clean["full"]["mean"], rel=1e-9)
    assert clean["full"]["mean"] > 0 and "noise_free" not in cells["lsa_quadratic_quad1"]
    assert family.reaches_noise_free("uniform:5") and family.reaches_noise_free("categorical:0,1")
    assert not family.reaches_noise_free("categorical:1,3") and not family.reaches_noise_free("fixed:1")
    assert "σ = 0: − FULL" in (out / "variants.md").read_text().split("## Against FULL by σ")[1]
    # each layer skipped in turn: the unskipped loss is the cell's own on those sequences (all 500 here), and a
    # skipped layer of the RetNet (no FFN) is its attention output zeroed by a hook, evaluated apart
    skip = cells["retnet"]["layer_skip"]
    assert skip["prior"]["loss"] == pytest.approx(cells["retnet"]["loss"]["mean"], rel=1e-9)
    assert skip["noise_free"]["loss"] == pytest.approx(clean["loss"]["mean"], rel=1e-9)
    assert skip["full_noise_free"]["loss"] == pytest.approx(clean["full"]["mean"], rel=1e-9)
    for layer in range(2):
        zero = (f"blocks.{layer}.hook_attn_out", lambda t, hook: torch.zeros_like(t))
        hooked = lambda b: exported.run_with_hooks(b.tokens.to(exported.cfg.torch_dtype), fwd_hooks=[zero])  # noqa: E731, B023
        want = adjusted_loss(hooked, on_paper.at_sigma(0.0)).mean
        assert skip["noise_free"]["skipped"][layer] == pytest.approx(want, rel=1e-9)
        assert abs(want / skip["noise_free"]["loss"] - 1) > 1e-7  # 4 steps of training: small, but beyond rel
    assert len(skip["full_prior"]["skipped"]) == 2 and "layer_skip" not in cells["lsa_quadratic_quad1"]
    table = (out / "variants.md").read_text().split("## Skipping a layer")[1].split("\n## ")[0]
    assert "| FULL (zoo) | 2 |" in table and "| retnet | 2 |" in table and "quad1" not in table
    assert "## Against FULL by σ" in (out / "variants.md").read_text()
    gates = cells["retnet"]["gates"]  # γ per layer and head: the exported best seed's own decays
    for l, block in enumerate(exported.blocks):
        assert gates["by_head"][l] == pytest.approx(torch.sigmoid(block.attn.decay_logit).tolist(), rel=1e-6)
    assert "| uniform:5 | retnet | 2 | gamma |" in (out / "variants.md").read_text().split("## Gates by σ")[1]
    assert "gates" not in cells["lsa_quadratic_quad1"]
    lam, full_lam = cells["retnet"]["implied_lambda"], cells["retnet"]["full_implied_lambda"]
    assert len(lam["median_by_sigma"][-1]) == len(full_lam["median_by_sigma"][-1]) == 4
    assert lam["oracle_by_sigma"] == pytest.approx([s * s for s in lam["sigma"]])
    table = (out / "variants.md").read_text().split("## Implied ridge λ by σ")[1].split("## ")[0]
    assert "| FULL (zoo) | 2 |" in table and "| retnet | 2 |" in table and "quad1" not in table
    assert "retnet" in (out / "variants.md").read_text()
    md = out / "variants.md"  # the hand-written answers survive the tables' rewrite
    md.write_text(md.read_text() + "\n## Answers\n\nwritten by hand\n")
    family.main(["--root", str(root), "--eval-seq", "500", "--out", str(out), "--zoo", str(tmp_path / "zoo")])
    text = md.read_text()
    assert text.count("## Answers") == 1 and text.endswith("## Answers\n\nwritten by hand\n") and "| retnet |" in text
    per_layer = text.split("## Per layer")[1].split("\n## ")[
        0
    ]  # retnet's token-weight fit per layer, beside its readout
    assert per_layer.count("| uniform:5 | retnet | 2 |") == 1 and "| uniform:5 | lsa_quadratic_quad1 | 2 |" in per_layer
    # interp probe and interp eval take the family's runs: the one readout, each run on its own task
    run = next(p for p in root.iterdir() if "retnet" in p.name)
    quad = next(p for p in root.iterdir() if "quad1" in p.name)
    assert main(["probe", str(run), str(quad), "--json", str(tmp_path / "p.json"), "--probe-seq", "64"]) == 0
    retnet, lsa_quad = json.loads((tmp_path / "p.json").read_text())["models"]
    printed = capsys.readouterr().out.split("retnet L=2")[1]
    assert "l skipped" in printed and f"{retnet['loss_skipped'][0]['mean']:.4g}" in printed
    assert main(["probe", str(run), "--n", "10", "--json", str(tmp_path / "short.json")]) == 2  # n = d: no fit
    model, data = load(run), EvalSet("uniform:5", n_seq=64, seed=0)
    batch = data.draw()
    want = json.loads(json.dumps(readout_summary(model, batch.tokens, batch.sigma)))
    got_w, want_w = retnet["readout"].pop("token_weights"), want.pop("token_weights")  # ALS: equal to rounding
    assert retnet["readout"] == want and got_w["residual"] == pytest.approx(want_w["residual"], rel=1e-9)
    assert got_w["by_position"][0] == pytest.approx(want_w["by_position"][0], rel=1e-9, abs=1e-12)
    assert [e["mean"] for e in retnet["loss_per_layer"]] == [e.mean for e in per_layer_loss(model, data)]
    for layer in range(2):  # each layer skipped: its attention output zeroed by a hook, evaluated apart
        zero = (f"blocks.{layer}.hook_attn_out", lambda t, hook: torch.zeros_like(t))
        hooked = lambda b: model.run_with_hooks(b.tokens.to(model.cfg.torch_dtype), fwd_hooks=[zero])  # noqa: E731, B023
        assert retnet["loss_skipped"][layer]["mean"] == pytest.approx(adjusted_loss(hooked, data).mean, rel=1e-9)
    assert (retnet["family"], retnet["n_layers"], "quad" in retnet) == ("retnet", 2, False)
    assert lsa_quad["quad"] == 1.0 and "token_weights" not in lsa_quad["readout"]
    on_task = EvalSet("uniform:5", n_seq=64, seed=0, quad=1.0)
    assert lsa_quad["loss_per_layer"][-1]["mean"] == pytest.approx(per_layer_loss(load(quad), on_task)[-1].mean)
    swept = json.loads((root / "sweep.json").read_text())["runs"][quad.name]["adjusted_loss"]  # the end table's
    assert swept["mean"] == pytest.approx(adjusted_loss(load(quad), on_task.replace(n_seq=swept["n_seq"])).mean)
    assert main(["eval", str(quad), "--n-seq", "64", "--no-baselines", "--json", str(tmp_path / "e.json")]) == 0
    assert json.loads((tmp_path / "e.json").read_text())["rows"][0]["mean"] == pytest.approx(
        adjusted_loss(load(quad), on_task.replace(n_seq=64)).mean
    )


def test_the_family_script_names_the_cells_near_full7():
    """A 7-layer cell within 10% of FULL-7 (by its paired difference) is marked for seeds 1 and 2; other depths,
    cells without a FULL to pair with, and the quadratic task's cells (adjusted against the linear oracle ridge on
    their own task) are not listed."""
    from tests.helpers import experiment_script

    family = experiment_script("family")

    def cell(loss, diff, quad=0.0, even=None):  # even: the paired difference against FULL of as many seeds
        c = {"loss": {"mean": loss}, "vs_full": {"mean": diff, "stderr": 0.001}, "quad": quad, "seeds": {"s0": {}}}
        return c | ({"vs_full_same_seeds": {"mean": even, "stderr": 0.001}} if even is not None else {})

    cells = {
        ("uniform:5", "delta", 7): cell(0.050, 0.002, even=0.0),  # FULL 0.048: ratio 1.042; FULL's seed 0: 1.000
        ("uniform:5", "causal", 7): cell(0.060, 0.012),  # FULL 0.048: 1.25
        ("uniform:5", "retnet", 7): cell(0.056, 0.008, even=0.004),  # 1.167, but 1.077 against FULL's seed 0 (0.052)
        ("uniform:5", "gla", 7): cell(0.046, -0.002),  # FULL 0.048: 0.958, beats it
        ("uniform:5", "qkv", 4): cell(0.060, 0.0),
        ("uniform:5", "lsa_quad1", 7): {"loss": {"mean": 0.1}, "quad": 1.0},
        ("uniform:5", "lsa_relu_quad1", 7): cell(-1.2, -1.25, quad=1.0),  # its own task: no ratio to FULL's
    }
    rows = family.near_full(cells, 7)
    assert [(r[1], r[2], r[4], r[5], r[6]) for r in rows] == [
        ("gla", "1", "0.958", "–", "yes"),
        ("delta", "1", "1.042", "1.000", "yes"),
        ("retnet", "1", "1.167", "1.077", "yes"),
        ("causal", "1", "1.250", "–", "no"),
    ]


def test_the_ffn_readout_distillation_is_guarded_as_the_trainer_is():
    """experiments/ffn_readout.py's distillation: its lr warms up linearly and decays to 0 (closed form); a student
    started at the teacher stays there (½·difference² has zero gradient); and a student whose ŷ overflows float32 on
    every sequence is never updated (each update skipped and counted), where an unguarded Adam step turns it nan."""
    from tests.helpers import experiment_script

    script = experiment_script("ffn_readout")
    steps = 200
    warm = round(script.DISTILL_WARMUP * steps)
    assert script.distill_lr(0, steps) == pytest.approx(1 / warm)
    assert script.distill_lr(warm - 1, steps) == pytest.approx(1.0)
    assert script.distill_lr(warm, steps) == pytest.approx(1.0)
    assert script.distill_lr(warm + (steps - warm) // 2, steps) == pytest.approx(0.5)
    assert script.distill_lr(steps - 1, steps) < 1e-3

    g = torch.Generator().manual_seed(0)
    teacher = LinearTransformer.from_matrices(
        0.05 * torch.randn(2, 1, 11, 11, generator=g), 0.05 * torch.randn(2, 1, 11, 11, generator=g)
    )
    same, skipped = script.distilled(teacher, teacher, "uniform:5", 20, steps=3)
    assert skipped == 0 and torch.equal(same.P, teacher.P) and torch.equal(same.Q, teacher.Q)

    wild = LinearTransformer.from_matrices(1e6 * teacher.P.detach(), 1e6 * teacher.Q.detach())
    with torch.no_grad():
        assert not torch.isfinite(wild(sample_tasks(64, 10, 20, "uniform:5", g).tokens)).any()
    student, skipped = script.distilled(teacher, wild, "uniform:5", 20, steps=3)
    assert skipped == 3 and torch.equal(student.P, wild.P) and torch.equal(student.Q, wild.Q)


def test_the_ffn_readout_script_sees_a_linear_ffn_and_switches_ffns_off(tmp_path):
    """experiments/ffn_readout.py on a zoo of one FULL-2 + ReLU FFN whose units pair up (ReLU(z) − ReLU(−z) = z: the
    linear map B A): the fit is exact, the linearized model is the model, the last FFN off at the context changes
    nothing (those rows reach no output), and the query's y → y entry is B A's."""
    from interp.checkpoints import save_checkpoint
    from interp.variants import build
    from tests.helpers import experiment_script

    model = build(ModelConfig(d=10, n_layers=2, attention="lsa", mlp="relu", mlp_width=8))
    g = torch.Generator().manual_seed(0)
    A, B = 0.2 * torch.randn(4, 11, generator=g), 0.2 * torch.randn(11, 4, generator=g)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.P.copy_(0.01 * torch.randn(block.attn.P.shape, generator=g))
            block.attn.Q.copy_(0.01 * torch.randn(block.attn.Q.shape, generator=g))
            block.mlp.W_in.copy_(torch.cat([A, -A])), block.mlp.W_out.copy_(torch.cat([B, -B], dim=1))
    (tmp_path / "uniform5").mkdir()
    save_checkpoint(tmp_path / "uniform5" / "lsa_relu2.safetensors", model, step=1)
    script = experiment_script("ffn_readout")
    script.main(["--eval-seq", "256", "--distill-steps", "3", "--zoo", str(tmp_path), "--out", str(tmp_path / "out")])
    (cell,) = json.loads((tmp_path / "out" / "ffn_readout.json").read_text())["cells"]
    assert max(cell["ffn_fit"]["query_residual"] + cell["ffn_fit"]["context_residual"]) < 1e-5
    assert cell["ffn_fit"]["query_scale"] == pytest.approx([float((B @ A)[-1, -1])] * 2, rel=1e-4)
    rows = cell["rows"]
    loss = rows["model"]["loss"]["mean"]  # float32 products: the same to rounding
    assert abs(rows["every FFN linearized"]["vs_model"]["mean"]) < 1e-6 * (1 + abs(loss))
    assert abs(rows["FFN 2 off at the context"]["vs_model"]["mean"]) < 1e-6 * (1 + abs(loss))
    assert rows["FFN 2 off at the query"]["vs_model"]["mean"] != 0.0 and "zoo FULL × c" in rows
    assert "| uniform:5 | lsa_relu2 | 2 | 2 |" in (tmp_path / "out" / "ffn_readout.md").read_text()
    # FULL distilled from the model (3 steps here), from its own attention maps and from the zoo's FULL
    assert cell["distill"]["steps"] == 3 and set(cell["distill"]["mismatch"]) == {
        "zoo FULL",
        "FULL distilled from its attention",
        "FULL distilled from the zoo FULL",
    }
    assert (
        "FULL distilled from its attention" in rows
        and "## Can FULL compute it?" in (tmp_path / "out" / "ffn_readout.md").read_text()
    )
    # a second run copies the unchanged cell; a changed model file, other settings or --fresh measure it again
    args = ["--eval-seq", "256", "--distill-steps", "3", "--zoo", str(tmp_path), "--out", str(tmp_path / "out")]
    out = lambda: json.loads((tmp_path / "out" / "ffn_readout.json").read_text())  # noqa: E731
    script.main(args)
    assert out()["meta"]["reused"] == 1 and out()["cells"] == [cell]
    for again in (args + ["--fresh"], ["--eval-seq", "128", *args[2:]]):
        script.main(again)
        assert out()["meta"]["reused"] == 0
    script.main(args)  # back at 256 sequences after a run at 128: measured again, not the 128's numbers
    assert out()["meta"]["reused"] == 0 and out()["cells"][0]["rows"] == cell["rows"]
    with torch.no_grad():
        model.blocks[1].mlp.W_out.mul_(2.0)
    save_checkpoint(tmp_path / "uniform5" / "lsa_relu2.safetensors", model, step=1)
    script.main(args)
    assert out()["meta"]["reused"] == 0 and out()["cells"][0]["inputs"]["model"] != cell["inputs"]["model"]


def test_the_family_script_prints_an_undefined_implied_lambda_as_a_dash():
    """A model whose implied λ is constant over the probe sequences (a near-zero predictor: 20 steps at 7 layers) has
    no rank correlation with σ (nan, None once in JSON): its row shows "–" there, not a crash."""
    from tests.helpers import experiment_script

    family = experiment_script("family")
    lam = {"sigma": [1.0, 3.0], "median_by_sigma": [[0.5, None]], "spearman_sigma": [None], "median_relerr": [0.25]}
    (text,) = [t for t in family.implied_lambda_tables({("uniform:5", "gla", 7): {"quad": 0.0, "implied_lambda": lam}})
               if "gla" in t]  # fmt: skip
    assert "| gla | 7 | 0.5 | – | – | 0.25 |" in text


def test_the_skip_table_gives_each_layers_ratio_and_a_blow_up_as_infinity():
    """layer_skip_tables: FULL's row once per depth and prior, then the cell's; each skipped layer's loss over the
    model's own, ∞ where a sequence blew up (None in JSON), "–" at σ = 0 on a prior that does not reach it."""
    from tests.helpers import experiment_script

    family = experiment_script("family")
    rec = lambda loss, skipped: {"loss": loss, "skipped": skipped, "blowups": [int(v is None) for v in skipped]}  # noqa: E731
    cells = {
        ("uniform:5", "delta", 2): {"quad": 0.0, "layer_skip": {
            "prior": rec(0.2, [None, 0.5]), "noise_free": rec(0.1, [0.093, 0.7]),
            "full_prior": rec(0.25, [None, 1.0]), "full_noise_free": rec(0.6, [None, 2.0])}},
        ("uniform:5", "gla", 2): {"quad": 0.0, "layer_skip": {"prior": rec(0.3, [0.6, 0.9])}},
        ("uniform:5", "lsa_quad1", 2): {"quad": 1.0, "layer_skip": {"prior": rec(0.1, [0.2, 0.2])}},
        ("categorical:1,3", "delta", 2): {"quad": 0.0, "layer_skip": {"prior": rec(0.2, [0.4, 0.4])}},
    }  # fmt: skip
    cat13, uniform5 = family.layer_skip_tables(cells)[2], family.layer_skip_tables(cells)[6]
    assert "| FULL (zoo) | 2 | 0.25 | ∞ / 4 | 0.6 | ∞ / 3.3 |" in uniform5
    assert (
        "| delta | 2 | 0.2 | ∞ / 2.5 | 0.1 | 0.93 / 7 |" in uniform5 and "| gla | 2 | 0.3 | 2 / 3 | – | – |" in uniform5
    )
    assert uniform5.count("FULL (zoo)") == 1 and "quad1" not in uniform5
    assert "| delta | 2 | 0.2 | 2 / 2 | – | – |" in cat13 and "FULL" not in cat13
