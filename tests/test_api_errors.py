"""The error contract of the Python API: a bad argument to a public function raises one of interp's own errors
(interp.InterpError, each also a ValueError or a TypeError) with a one-line message naming it; never an
AttributeError, KeyError, IndexError or a RuntimeError from torch deep inside (issue 24 item 8, issue 27 item 5).
"""

from __future__ import annotations

import pytest
import torch

import interp
from interp import moments, patching
from interp.baselines import ridge_weights
from interp.checkpoints import load_file, save_checkpoint
from interp.evalset import EvalSet
from interp.files import CheckpointError, InterpError, InvalidArgument, InvalidType
from interp.kernel import KernelError
from interp.run import RunLocked
from interp.sweep import SweepError
from interp.table import table1
from interp.train import TrainingDiverged
from tests.helpers import random_diag, random_full, small_batch


class Objects:
    """Small valid arguments, built once: a FULL and a DIAG model (d = 2), a batch of their width, an EvalSet, a
    spectral context, the full model's ActivationCache, a directory and an empty file."""

    def __init__(self, root):
        self.full = random_full(d=2, n_layers=2, n_heads=1)
        self.diag = random_diag(d=2, n_layers=2)
        self.batch = small_batch(batch=8, d=2, n=5)
        self.tokens = self.batch.tokens
        self.data = EvalSet("uniform:1", d=2, n=5, n_seq=16)
        self.ctx = interp.SpectralContext.of(self.batch)
        _, self.cache = self.full.run_with_cache(self.tokens)
        self.P, self.Q = self.full.P.detach(), self.full.Q.detach()
        self.root = root
        (root / "dir.safetensors").mkdir()
        (root / "empty.safetensors").write_bytes(b"")


@pytest.fixture(scope="module")
def obj(tmp_path_factory) -> Objects:
    return Objects(tmp_path_factory.mktemp("api_errors"))


def metric(y_hat):
    return y_hat.sum()


# (id, call): each call raises an InterpError. Grouped by module; the comment says what used to escape.
BAD_CALLS = [
    # moments: wrong-width tokens ran silently; a list, a str or a 2-D tensor raised AttributeError / ValueError
    ("predict-wrong-width", lambda o: moments.predict(o.full, o.tokens[:, :, :2])),
    ("predict-list", lambda o: moments.predict(o.full, o.tokens.tolist())),
    ("predict-str", lambda o: moments.predict(o.full, "tokens")),
    ("predict-2d", lambda o: moments.predict(o.full, o.tokens[0])),
    ("predict-int-tokens", lambda o: moments.predict(o.full, o.tokens.long())),
    ("predict-empty-batch", lambda o: moments.predict(o.full, o.tokens[:0])),
    ("predict-model-str", lambda o: moments.predict("model", o.tokens)),
    ("predict-width-str", lambda o: moments.predict(o.full, o.tokens, width="wide")),
    # model
    ("model-forward-str", lambda o: o.full("tokens")),
    ("model-per-layer-width", lambda o: o.full.predict_per_layer(o.tokens[:, :, :2])),
    ("model-run-with-cache-none", lambda o: o.full.run_with_cache(None)),
    ("model-names-filter-int", lambda o: o.full.run_with_cache(o.tokens, names_filter=3)),
    ("model-omegas-of-full", lambda o: o.full.omegas()),
    ("LinearTransformer-dict-cfg", lambda o: interp.LinearTransformer({"d": 2})),
    ("LinearTransformer-none-cfg", lambda o: interp.LinearTransformer(None)),
    ("LinearTransformer-generator-str", lambda o: interp.LinearTransformer(interp.ModelConfig(d=2), generator="g")),
    ("from_matrices-str", lambda o: interp.LinearTransformer.from_matrices("P", "Q")),
    ("from_matrices-none", lambda o: interp.LinearTransformer.from_matrices(None, None)),
    ("from_matrices-3d", lambda o: interp.LinearTransformer.from_matrices(o.P[0], o.Q[0])),
    ("from_matrices-no-layers", lambda o: interp.LinearTransformer.from_matrices(o.P[:0], o.Q[:0])),
    ("from_matrices-int", lambda o: interp.LinearTransformer.from_matrices(o.P.long(), o.Q.long())),
    ("from_matrices-nan", lambda o: interp.LinearTransformer.from_matrices(o.P * float("nan"), o.Q)),
    ("from_matrices-dtype", lambda o: interp.LinearTransformer.from_matrices(o.P, o.Q, dtype=torch.float64)),
    ("from_omegas-str", lambda o: interp.LinearTransformer.from_omegas("omegas", d=2)),
    ("from_omegas-d-0", lambda o: interp.LinearTransformer.from_omegas(torch.zeros(1, 4), d=0)),
    # config
    ("ModelConfig-negative-d", lambda o: interp.ModelConfig(d=-1)),
    ("ModelConfig-str-layers", lambda o: interp.ModelConfig(n_layers="4")),
    ("TrainConfig-model-dict", lambda o: interp.TrainConfig(model={"d": 2})),
    ("TrainConfig-preset", lambda o: interp.TrainConfig(preset="bogus")),
    ("TrainConfig-schedule", lambda o: interp.TrainConfig(schedule="cosine")),
    ("TrainConfig-guard", lambda o: interp.TrainConfig(guard="bogus")),
    ("TrainConfig-nan-lr", lambda o: interp.TrainConfig(lr=float("nan"))),
    ("TrainConfig.from_dict-list", lambda o: interp.TrainConfig.from_dict([])),
    # tasks
    ("NoisePrior.parse-none", lambda o: interp.NoisePrior.parse(None)),
    ("NoisePrior.parse-kind", lambda o: interp.NoisePrior.parse("gauss:1")),
    ("NoisePrior-by-hand", lambda o: interp.NoisePrior("bogus", (1.0,))),
    ("NoisePrior-no-values", lambda o: interp.NoisePrior("uniform", ())),
    ("sample_tasks-batch-0", lambda o: interp.sample_tasks(0)),
    ("sample_tasks-batch-str", lambda o: interp.sample_tasks("4")),
    ("sample_tasks-noise-int", lambda o: interp.sample_tasks(4, noise=3)),
    ("sample_tasks-generator-str", lambda o: interp.sample_tasks(4, generator="seed")),
    ("sample_tasks-x_cov-shape", lambda o: interp.sample_tasks(4, d=2, x_cov=torch.eye(3))),
    ("sample_tasks-x_cov-str", lambda o: interp.sample_tasks(4, d=2, x_cov="diag:1,1")),
    ("sample_tasks-x_cov-not-pd", lambda o: interp.sample_tasks(4, d=2, x_cov=-torch.eye(2))),
    ("sample_tasks-w_cov-shape", lambda o: interp.sample_tasks(4, d=2, w_cov=torch.eye(3))),
    ("sample_tasks-sigma-shape", lambda o: interp.sample_tasks(4, d=2, sigma=torch.ones(3))),
    ("sample_tasks-sigma-negative", lambda o: interp.sample_tasks(4, d=2, sigma=-1.0)),
    ("sample_tasks-sigma-nan", lambda o: interp.sample_tasks(4, d=2, sigma=float("nan"))),
    ("sample_tasks-dtype-int", lambda o: interp.sample_tasks(4, d=2, dtype=torch.int64)),
    ("sample_tasks-dtype-str", lambda o: interp.sample_tasks(4, d=2, dtype="float32")),
    ("sample_tasks-device", lambda o: interp.sample_tasks(4, d=2, device="bogus")),
    ("draw_tasks-sigma-str", lambda o: interp.draw_tasks(4, d=2, sigma="a")),
    # evalset
    ("EvalSet-noise-none", lambda o: EvalSet(None)),
    ("EvalSet-d-str", lambda o: EvalSet("uniform:1", d="2")),
    ("EvalSet-d-bool", lambda o: EvalSet("uniform:1", d=True)),
    ("EvalSet-seed-float", lambda o: EvalSet("uniform:1", seed=1.5)),
    ("EvalSet-sigma-str", lambda o: EvalSet("uniform:1", sigma="a")),
    ("EvalSet-sigma-inf", lambda o: EvalSet("uniform:1", sigma=float("inf"))),
    ("EvalSet.at_sigma-str", lambda o: o.data.at_sigma("a")),
    # spectral and baselines: a str, None or bare tokens where a TaskBatch belongs raised AttributeError
    ("SpectralContext.of-str", lambda o: interp.SpectralContext.of("batch")),
    ("SpectralContext.of-tokens", lambda o: interp.SpectralContext.of(o.tokens)),
    ("ctx.ridge-shape", lambda o: o.ctx.ridge(torch.ones(3))),
    ("ctx.ridge-str", lambda o: o.ctx.ridge("a")),
    ("ctx.gd-negative-steps", lambda o: o.ctx.gd(-1, 0.1)),
    ("ctx.gd-str-steps", lambda o: o.ctx.gd("3", 0.1)),
    ("ridge_predict-str", lambda o: interp.ridge_predict("batch", 1.0)),
    ("ridge_predict-negative-lam", lambda o: interp.ridge_predict(o.batch, -5.0)),
    ("ridge_weights-lam-shape", lambda o: ridge_weights(o.batch, torch.ones(3))),
    ("ols_predict-none", lambda o: interp.ols_predict(None)),
    ("oracle_predict-tokens", lambda o: interp.oracle_predict(o.tokens)),
    ("ConstRR-negative", lambda o: interp.ConstRR(-1.0)),
    ("ConstRR-str", lambda o: interp.ConstRR("a")),
    ("ConstRR-call-str", lambda o: interp.ConstRR(1.0)("batch")),
    ("GDk-negative-steps", lambda o: interp.GDk(-1, 0.1)),
    ("GDk-float-steps", lambda o: interp.GDk(1.5, 0.1)),
    ("TunedRR-str", lambda o: interp.TunedRR("a")),
    ("AdaRR-call-str", lambda o: interp.AdaRR()("batch")),
    ("Bayes-nodes-0", lambda o: interp.Bayes("uniform:1", nodes=0)),
    ("Bayes-call-str", lambda o: interp.Bayes("uniform:1")("batch")),
    # tuning
    ("tuned-d-0", lambda o: interp.tuned("uniform:1", d=0)),
    ("tuned-gd_steps-str", lambda o: interp.tuned("uniform:1", d=2, n=5, gd_steps="a")),
    ("tuned_baselines-names-str", lambda o: interp.tuned_baselines("uniform:1", d=2, n=5, names="constrr")),
    ("tuned_baselines-names-unknown", lambda o: interp.tuned_baselines("uniform:1", d=2, n=5, names=["lasso"])),
    # evaluate
    ("adjusted_loss-model-str", lambda o: interp.adjusted_loss("model", o.data)),
    ("adjusted_loss-data-str", lambda o: interp.adjusted_loss(o.full, "data")),
    ("adjusted_loss-data-none", lambda o: interp.adjusted_loss(o.full, None)),
    ("adjusted_loss-d-mismatch", lambda o: interp.adjusted_loss(o.full, EvalSet("uniform:1", d=3, n=5, n_seq=8))),
    ("evaluate_predictors-list", lambda o: interp.evaluate_predictors([o.full], o.data)),
    ("per_layer_loss-model-str", lambda o: interp.per_layer_loss("model", o.data)),
    ("per_layer_loss-d-mismatch", lambda o: interp.per_layer_loss(o.full, EvalSet("uniform:1", d=3, n=5, n_seq=8))),
    ("per_layer_profile-sigmas-str", lambda o: interp.per_layer_profile(o.full, "a", o.data)),
    ("per_layer_profile-sigma-negative", lambda o: interp.per_layer_profile(o.full, [-1.0], o.data)),
    ("sigma_profile-sigmas-none", lambda o: interp.sigma_profile({"m": o.full}, None, o.data)),
    ("sigma_grid-step-0", lambda o: interp.sigma_grid("uniform:1", step=0)),
    ("sigma_grid-noise-none", lambda o: interp.sigma_grid(None)),
    # probes
    ("diag_projection-str", lambda o: interp.diag_projection("P", "Q")),
    ("diag_projection-3d", lambda o: interp.diag_projection(o.P[0], o.Q[0])),
    ("diag_projection-mismatch", lambda o: interp.diag_projection(o.P, o.Q[:1])),
    ("diag_projection-width-1", lambda o: interp.diag_projection(torch.zeros(1, 1, 1, 1), torch.zeros(1, 1, 1, 1))),
    ("diag_projection-int", lambda o: interp.diag_projection(o.P.long(), o.Q.long())),
    ("diag_projection-nan", lambda o: interp.diag_projection(o.P * float("nan"), o.Q)),
    ("diag_ablation-model-str", lambda o: interp.diag_ablation("model", o.data)),
    ("diag_ablation-data-str", lambda o: interp.diag_ablation(o.full, "data")),
    ("diag_ablation-omega-shape", lambda o: interp.diag_ablation(o.full, o.data, omega=torch.zeros(3))),
    ("fit_layer_maps-S-str", lambda o: interp.fit_layer_maps(o.full, "S")),
    ("fit_layer_maps-S-3d", lambda o: interp.fit_layer_maps(o.full, torch.zeros(2, 3, 3))),
    ("fit_layer_maps-S-layers", lambda o: interp.fit_layer_maps(o.full, torch.zeros(5, 4, 3, 3))),
    ("implicit_model-tokens-str", lambda o: interp.implicit_model(o.full, "tokens")),
    ("implicit_model-model-str", lambda o: interp.implicit_model("model", o.tokens)),
    ("implicit_model-width", lambda o: interp.implicit_model(o.full, o.tokens[:, :, :2])),
    ("lemma44-imp-str", lambda o: interp.lemma44("imp", torch.zeros(2, 4))),
    ("lemma44-omega-shape", lambda o: interp.lemma44(interp.implicit_model(o.diag, o.tokens), torch.zeros(3))),
    ("probe_model-model-str", lambda o: interp.probe_model("model", o.data)),
    ("probe_model-data-str", lambda o: interp.probe_model(o.full, "data")),
    ("probe_model-fit_seq-0", lambda o: interp.probe_model(o.full, o.data, fit_seq=0)),
    ("probe_model-d-mismatch", lambda o: interp.probe_model(o.full, EvalSet("uniform:1", d=3, n=5, n_seq=8))),
    ("DriftData-str", lambda o: interp.DriftData("evalset")),
    ("drift_trajectory-str", lambda o: interp.drift_trajectory("trajectory", interp.DriftData(o.data, fit_seq=8))),
    ("drift_trajectory-data-str", lambda o: interp.drift_trajectory([(0, o.full)], "data")),
    ("run_drift-none", lambda o: interp.run_drift(None)),
    ("run_drift-missing", lambda o: interp.run_drift(o.root / "no-run")),
    # patching: a str cache or metric raised TypeError from inside; a mismatched recovery pair a RuntimeError
    ("patch-tokens-str", lambda o: patching.get_act_patch_resid_pre(o.full, "tokens", o.cache, metric)),
    ("patch-tokens-width", lambda o: patching.get_act_patch_resid_pre(o.full, o.tokens[:, :, :2], o.cache, metric)),
    ("patch-model-str", lambda o: patching.get_act_patch_resid_pre("model", o.tokens, o.cache, metric)),
    ("patch-cache-str", lambda o: patching.get_act_patch_resid_pre(o.full, o.tokens, "cache", metric)),
    ("patch-cache-empty", lambda o: patching.get_act_patch_stats(o.full, o.tokens, {}, metric)),
    ("patch-metric-str", lambda o: patching.get_act_patch_attn_out(o.full, o.tokens, o.cache, "metric")),
    (
        "patch-shorter-tokens",
        lambda o: patching.get_act_patch_attn_head_out_by_pos(o.full, o.tokens[:, :3], o.cache, metric),
    ),
    ("permute_labels-str", lambda o: patching.permute_labels("tokens")),
    ("permute_labels-2d", lambda o: patching.permute_labels(o.tokens[0])),
    ("recovery_metric-str", lambda o: patching.recovery_metric("clean", "corrupted")),
    ("recovery_metric-shapes", lambda o: patching.recovery_metric(torch.ones(3), torch.zeros(4))),
    # runs, checkpoints and paths: None / an int raised TypeError from os, a long name an OSError
    ("load-none", lambda o: interp.load(None)),
    ("load-int", lambda o: interp.load(3)),
    ("load-empty-path", lambda o: interp.load("")),
    ("load-nul", lambda o: interp.load("a\0b")),
    ("load-name-too-long", lambda o: interp.load("a" * 5000)),
    ("load-missing", lambda o: interp.load(o.root / "missing.safetensors")),
    ("load-directory", lambda o: interp.load(o.root / "dir.safetensors")),
    ("load-empty-file", lambda o: interp.load(o.root / "empty.safetensors")),
    ("load_file-none", lambda o: load_file(None)),
    ("save_checkpoint-model-str", lambda o: save_checkpoint(o.root / "x.safetensors", "model", 0)),
    ("Run-none", lambda o: interp.Run(None)),
    ("Run-int", lambda o: interp.Run(3)),
    ("Run-nul", lambda o: interp.Run("a\0b")),
    ("Run-file-config", lambda o: interp.Run(o.root / "empty.safetensors").config()),
    ("Run-missing-checkpoints", lambda o: interp.Run(o.root / "missing").last_checkpoint()),
    ("train_model-cfg-none", lambda o: interp.train_model(None, o.root / "r")),
    ("train_model-cfg-dict", lambda o: interp.train_model({"n": 3}, o.root / "r")),
    ("train_model-run_dir-none", lambda o: interp.train_model(interp.TrainConfig(), None)),
    ("run_sweep-runs-str", lambda o: interp.run_sweep("runs", o.root / "s")),
    ("run_sweep-root-none", lambda o: interp.run_sweep({"arch": ["diag"]}, None)),
    ("run_sweep-backend", lambda o: interp.run_sweep({"arch": ["diag"]}, o.root / "s", backend="bogus")),
    ("run_sweep-unknown-option", lambda o: interp.run_sweep({"bogus": [1]}, o.root / "s")),
    ("table1-roots-str", lambda o: table1(str(o.root))),
    ("table1-root-missing", lambda o: table1([o.root / "missing"])),
]


@pytest.mark.parametrize("call", [c for _, c in BAD_CALLS], ids=[name for name, _ in BAD_CALLS])
def test_a_bad_argument_is_one_interp_error(obj, call):
    with pytest.raises(InterpError) as info:
        call(obj)
    err = info.value
    assert isinstance(err, (ValueError, TypeError)), type(err).__mro__
    message = str(err)
    assert message and "\n" not in message, message
    assert "Traceback" not in message


def test_enough_calls_are_covered():
    assert len(BAD_CALLS) >= 35 and len({name for name, _ in BAD_CALLS}) == len(BAD_CALLS)


def test_error_kinds():
    """The kinds subclass InterpError and ValueError / TypeError, so `except ValueError` keeps working."""
    for kind in (InvalidArgument, CheckpointError, RunLocked, SweepError, KernelError):
        assert issubclass(kind, InterpError) and issubclass(kind, ValueError), kind
    assert issubclass(InvalidType, InterpError) and issubclass(InvalidType, TypeError)
    assert issubclass(TrainingDiverged, InterpError) and issubclass(TrainingDiverged, RuntimeError)
    assert interp.InterpError is InterpError and interp.InvalidArgument is InvalidArgument
    assert str(InvalidArgument("one\ntwo  \n three")) == "one two three"  # always one line


def test_wrong_widths_are_named_and_types_are_type_errors(obj):
    with pytest.raises(InvalidArgument, match=r"d\+1 = 3"):
        moments.predict(obj.full, obj.tokens[:, :, :2])
    with pytest.raises(InvalidType, match="torch.Tensor, got list"):
        moments.predict(obj.full, obj.tokens.tolist())
    with pytest.raises(InvalidArgument, match="d = 2 but the evaluation set d = 3"):
        interp.adjusted_loss(obj.full, EvalSet("uniform:1", d=3, n=5, n_seq=8))
    with pytest.raises(InvalidArgument, match="config.json: bad run config .*preset must be one of fast, paper"):
        run = obj.root / "bad_preset"
        (run / "checkpoints").mkdir(parents=True)
        (run / "config.json").write_text(
            '{"format_version": 1, "model": {"d": 2, "n_layers": 1}, "preset": "bogus", "noise": "uniform:1"}'
        )
        interp.Run(run).config()


def test_valid_calls_still_work(obj):
    """What the checks accept: float64 tokens into a float32 model, a numpy-free list λ grid, σ as a 0-dim tensor,
    one covariance for every sequence."""
    model = interp.LinearTransformer(interp.ModelConfig(d=2, n_layers=1), generator=torch.Generator().manual_seed(0))
    assert model(obj.tokens).shape == (8,)
    assert moments.predict(model, obj.tokens.float()).shape == (8,)
    assert obj.ctx.ridge(torch.tensor([[0.5], [1.0]])).shape == (2, 8)  # a grid of λ's, broadcast over the batch
    batch = interp.sample_tasks(4, d=2, n=3, x_cov=2 * torch.eye(2), sigma=torch.tensor(0.5))
    assert torch.all(batch.sigma == 0.5)
    assert obj.data.at_sigma(torch.tensor(1.0)).sigma == 1.0
    assert interp.NoisePrior("categorical", [1, 3]).values == (1.0, 3.0)


def test_the_package_imports_its_names_on_first_use():
    """interp/__init__.py is lazy (PEP 562): importing it imports no torch; every name of __all__ resolves, is listed
    by dir() and works with `from interp import X`; a submodule is an attribute as before (interp.kernel)."""
    import subprocess
    import sys

    code = (
        "import sys, interp\n"
        "assert 'torch' not in sys.modules and 'interp.run' not in sys.modules\n"
        "from interp import load, InterpError\n"
        "assert load is interp.run.load and InterpError is interp.files.InterpError\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
    assert interp.__all__ == list(interp._EXPORTS)
    assert set(interp.__all__) <= set(dir(interp))
    for name in interp.__all__:
        module, attr = interp._EXPORTS[name]
        assert getattr(interp, name) is getattr(__import__(module, fromlist=[attr]), attr), name
    assert interp.kernel.available() in (True, False) and interp.evaluate_predictors is interp.evaluate.evaluate
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        interp.nosuch  # noqa: B018
