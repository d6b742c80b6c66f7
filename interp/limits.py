"""Size limits: pure constants, the bottom of the core's layer order (README, Architecture)."""

# Sane limits, checked before anything is allocated (a config or checkpoint header can declare anything).
MAX_D, MAX_LAYERS, MAX_HEADS = 4096, 256, 256
MAX_PARAMS = 2**28  # weights of one model (1 GiB in float32)
MAX_BATCH_ELEMENTS = 2**28  # batch * (n + 1) * (d + 1): the token tensor of one training step
MAX_STEPS, MAX_N = 10**9, 2**20
MAX_SEED = 2**62
# A noise std above this is no regression task (the paper's priors stop at 7): it only overflows float32 and builds
# unbounded σ grids (σ_max + 1 in steps of 0.5).
MAX_SIGMA = 1e3
# A full d×d input covariance is stored in config.json and in the resume header, each read capped at 1 MiB.
MAX_COV_D = 128
MAX_FILE_BYTES = 1 << 34  # 16 GiB: the most any read may ask for, whatever the caller's own limit
# A checkpoint or resume file: MAX_PARAMS float64 weights with Adam's two moments (6 GiB), plus 16 MiB for the
# header and the data RNG state. A larger file (a sparse one reports any size) is refused before a byte is read.
MAX_CHECKPOINT_BYTES = 3 * 8 * MAX_PARAMS + (1 << 24)
MAX_TEXT_BYTES = 1 << 28  # metrics logs, sweep.json and caches: JSON read whole
MAX_CONFIG_BYTES = 1 << 20  # config.json, covariance and grid files
# Runs in one sweep: far beyond any grid of this paper's (Table 1 at 5 seeds is 1 050 runs), and the grid is refused
# on its size before a run is expanded (each run's config is built and checked: about 0.15 ms).
MAX_SWEEP_RUNS = 100_000
