"""TrainConfig.x_cov, the input covariance Λ (x_i, x_t ~ N(0, Λ); Zhang, Frei & Bartlett 2024): stored in
config.json, validated in one line, and named by `diag:` or a .json file on the command line."""

import dataclasses
import json

import pytest

from interp.config import ModelConfig, TrainConfig, covariance_spec, describe_covariance
from interp.run import Run

COV = [[2.0, 0.5, 0.0], [0.5, 1.0, -0.3], [0.0, -0.3, 0.5]]


def test_x_cov_round_trips_through_config_json_and_old_configs_load(tmp_path):
    cfg = TrainConfig(model=ModelConfig(d=3, n_layers=1), x_cov=COV)
    assert cfg.x_cov == tuple(map(tuple, COV))  # stored as a hashable tuple of rows
    assert TrainConfig.from_dict(json.loads(cfg.to_json())) == cfg
    run = Run(tmp_path / "run")
    run.path.mkdir()
    run.write_config(cfg)
    assert json.loads(run.config_path.read_text())["x_cov"] == COV
    assert run.config() == cfg
    old = json.loads(run.config_path.read_text())
    del old["x_cov"]  # written before the field existed
    run.config_path.write_text(json.dumps(old))
    assert run.config() == TrainConfig(model=ModelConfig(d=3, n_layers=1)) and run.config().x_cov is None


def test_rounding_level_asymmetry_is_averaged():
    x_cov = TrainConfig(model=ModelConfig(d=2), x_cov=[[2.0, 0.5 + 1e-15], [0.5, 1.0]]).x_cov
    assert x_cov[0][1] == x_cov[1][0] and 0.5 < x_cov[0][1] < 0.5 + 1e-15  # the sampler reads one triangle


@pytest.mark.parametrize(
    "x_cov,needle",
    [
        ([[1.0, 0.0], [0.0, 1.0]], "x_cov must be 3×3 (d=3), got 2 rows"),
        ([[1.0, 0.0, 0.0], [0.0, 1.0], [0.0, 0.0, 1.0]], "x_cov must be 3×3 (d=3), got 3 rows of lengths [2, 3]"),
        ([[1.0, 0.2, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "x_cov must be symmetric (largest |Λ_ij − Λ_ji| is 0.2)"),
        (
            [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            "x_cov must be positive definite (smallest eigenvalue -1)",
        ),
        (
            [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
            "x_cov must be positive definite (smallest eigenvalue 0)",
        ),
        ([[1.0, 0.0, 0.0], [0.0, float("nan"), 0.0], [0.0, 0.0, 1.0]], "x_cov entries must be finite numbers"),
        ([[1.0, 0.0, 0.0], [0.0, "1", 0.0], [0.0, 0.0, 1.0]], "x_cov entries must be finite numbers"),
        ([1.0, 1.0, 1.0], "x_cov must be a d×d matrix (a list of rows)"),
        ("diag:1,1,1", "x_cov must be a matrix or null"),
    ],
)
def test_bad_x_cov_is_one_line_naming_the_field(x_cov, needle):
    with pytest.raises((ValueError, TypeError)) as err:
        TrainConfig(model=ModelConfig(d=3), x_cov=x_cov)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_covariance_spec_diag_and_json_file(tmp_path):
    assert covariance_spec("diag:3,1.5,0.3") == ((3.0, 0.0, 0.0), (0.0, 1.5, 0.0), (0.0, 0.0, 0.3))
    assert describe_covariance(covariance_spec("diag:3,1.5,0.3")) == "diag:3,1.5,0.3"
    path = tmp_path / "cov.json"
    path.write_text(json.dumps(COV))
    assert covariance_spec(str(path)) == tuple(map(tuple, COV))
    assert describe_covariance(covariance_spec(str(path))) == "a full 3×3 matrix" and describe_covariance(None) == "I"
    path.write_text("[[1, 0], [0")
    for spec, needle in (
        ("diag:3,x", "numbers expected after 'diag:'"),
        ("diag:1,0", "must be positive definite"),
        ("cov.txt", "neither diag:λ1,...,λd nor a .json file"),
        (str(tmp_path / "missing.json"), "no such file"),
        (str(path), "not a JSON matrix"),
    ):
        with pytest.raises(ValueError) as err:
            covariance_spec(spec)
        assert needle in str(err.value) and "\n" not in str(err.value)


# Every existing flag and the field it sets: users' scripts spell them so (interp train, interp sweep, grid files).
FLAGS = {
    "--d": "model.d",
    "--layers": "model.n_layers",
    "--heads": "model.n_heads",
    "--arch": "model.param",
    "--dtype": "model.dtype",
    "--attention": "model.attention",
    "--head-width": "model.head_width",
    "--mlp": "model.mlp",
    "--mlp-width": "model.mlp_width",
    "--quad": "quad",
    "--noise": "noise",
    "--n": "n",
    "--seed": "seed",
    "--preset": "preset",
    "--steps": "steps",
    "--batch": "batch",
    "--lr": "lr",
    "--schedule": "schedule",
    "--clip": "clip",
    "--guard": "guard",
    "--checkpoints": "n_checkpoints",
    "--save-every": "resume_every",
    "--init": "init",
    "--init-noise": "init_noise",
    "--device": "device",
    "--x-cov": "x_cov",
    "--stress": "stress",
    "--stress-scale": "stress_scale",
    "--polish": "polish",
    "--polish-tail": "polish_tail",
    "--spectral-polish": "spectral_polish",
    "--start-as": "start_as",
}
NOT_OPTIONS = {
    "model",
    "warmup",
    "log_every",
    "model.init_scale",
    "model.feature_map",
    "model.qk_scale",
}  # set in Python or config.json only


def test_each_training_option_is_declared_once_on_its_field():
    """OPTIONS, derived from the fields' declarations: one flag per field, every field an option or named here, each
    option's default its field's, and help that states that default."""
    from interp.config import OPTIONS, Option

    fields = {f.name for f in dataclasses.fields(TrainConfig)} | {
        f"model.{f.name}" for f in dataclasses.fields(ModelConfig)
    }
    assert {o.flag: o.field for o in OPTIONS.values()} == FLAGS
    assert set(FLAGS.values()) | NOT_OPTIONS == fields and not set(FLAGS.values()) & NOT_OPTIONS
    spellings = [s for o in OPTIONS.values() for s in (o.flag, *o.aliases)]
    assert len(spellings) == len(set(spellings)) and {a for o in OPTIONS.values() for a in o.aliases} == {"--seeds"}
    default = TrainConfig()
    for key, opt in OPTIONS.items():
        assert isinstance(opt, Option) and key == opt.flag[2:].replace("-", "_")
        assert opt.of(default) == opt.default
        if opt.default is not None:
            shown = f"{opt.default:g}" if isinstance(opt.default, float) else str(opt.default)
            assert f"default {shown}" in opt.help, (opt.flag, opt.help)


def test_config_from_options_maps_keys_to_fields():
    from interp.config import config_from_options

    cfg = config_from_options(
        {"arch": "gdpp", "layers": 2, "d": 2, "checkpoints": 3, "save_every": 7, "clip": 0, "noise": "uniform:5.0"}
    )
    assert (cfg.model.param, cfg.model.n_layers, cfg.model.d) == ("gdpp", 2, 2)
    assert (cfg.n_checkpoints, cfg.resume_every, cfg.clip, cfg.noise) == (3, 7, None, "uniform:5")
    assert config_from_options({"d": 2, "x_cov": "diag:1,2"}).x_cov == ((1.0, 0.0), (0.0, 2.0))
    assert config_from_options({}) == TrainConfig()
    with pytest.raises(ValueError, match="unknown run option 'n_checkpoints'"):
        config_from_options({"n_checkpoints": 3})  # option keys are the flags' names, not the fields'
