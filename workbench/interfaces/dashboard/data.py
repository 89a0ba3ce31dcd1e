"""The dashboard's data, loaded once per data directory behind a cache, and the session's uploads.

`load_data(data_dir)` reads measurements (workbench.storage.store), calibrations (models.hardware), joins the comparison
(workbench.analysis.compare.compare_points), predicts every GPU in the catalogue on a batch grid for the shapes on offer
(models.roofline.predict — GPUs without measurements get predictions only), evaluates the hypotheses on our
measurements only, and predicts the imported public timings (workbench.storage.public), kept in their own frame.
Callbacks only filter these frames and build figures. Key columns are pandas categoricals so selections are cheap at
10⁵ rows.
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from models.paths import dataset_dir
from models.roofline import TIERS
from workbench.interfaces.dashboard.uploads import Upload

# Batch grid of the predicted curves: quarter-octave steps from 1 to 256 plus every measured M.
BATCH_GRID = tuple(sorted({int(round(2 ** (i / 4))) for i in range(33)}))
CATEGORY_COLUMNS = ("gpu_key", "scheme", "kernel", "mode", "role")
TIER_COLUMNS = TIERS
MAX_UPLOADS = 32


RowIndex = dict[tuple[str, int, int], np.ndarray]  # (gpu_key, N, K) -> the positions of its rows, ascending


def row_index(frame: pd.DataFrame) -> RowIndex:
    """Where each (GPU, N, K) of a frame is (queries.select_measured / select_predicted take a selection's rows from
    it instead of testing every row): built once per frame."""
    if frame.empty:
        return {}
    groups = frame.groupby(["gpu_key", "N", "K"], observed=True, sort=False).indices
    return {(str(g), int(n), int(k)): np.sort(pos) for (g, n, k), pos in groups.items()}


@dataclass
class DashboardData:
    """Everything the callbacks read. Frames are never mutated after loading."""

    data_dir: Path
    gpus: dict[str, Any]  # models.hardware.GPU by key
    calibrations: dict[str, Any]  # gpu_key -> calibration
    measurements: pd.DataFrame  # workbench.storage.schema.MEASUREMENT_COLUMNS (+ categoricals)
    comparison: pd.DataFrame  # workbench.analysis.compare.compare_points(measurements)
    latest: pd.DataFrame  # workbench.analysis.compare.latest_points(comparison): the newest run of each point
    predictions: pd.DataFrame  # models.roofline.predict over GPUs × schemes × BATCH_GRID × shapes
    shapes: list[tuple[int, int]]  # (N, K) on offer
    model_keys: list[str]
    hypotheses: pd.DataFrame  # workbench.analysis.hypotheses.evaluate_all verdict rows ("" frame when unavailable)
    rollups: pd.DataFrame  # models.rollup.rollup for every model × GPU × scheme on BATCH_GRID (all tiers)
    notes: list[str] = field(default_factory=list)  # what could not be loaded, shown on the page
    # imported public timings (workbench.storage.public; never our measurements) with the predicted tiers of each row
    public: pd.DataFrame = field(default_factory=pd.DataFrame)
    # per GPU kind: rows measuring kernel code changed since / recorded without a fingerprint (analysis.code_drift)
    code_drift: pd.DataFrame = field(default_factory=pd.DataFrame)
    params: Any = None  # the kernel tier's ParamTable (analysis.kernel_tier.params_for(data_dir)); None: the shipped
    # (model, gpu) -> the kernel tier's roll-up, filled on first use (kernel_rollup): not precomputed, it costs ~2 s
    kernel_rollups: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)
    # (model, gpu, schemes, batch) -> the kernel tier's per-layer times of one step (views_breakdown.layer_parts)
    kernel_layers: dict[tuple, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)
    # (uploads, gpu, selection over every batch) -> the measured speedup table (views._measured_speedup)
    speedup_tables: dict[tuple, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)

    @functools.cached_property
    def measured_gpus(self) -> list[str]:
        return sorted(str(g) for g in self.comparison["gpu_key"].unique())

    @functools.cached_property
    def prediction_rows(self) -> RowIndex:
        return row_index(self.predictions)


def _categorize(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for col in CATEGORY_COLUMNS:
        if col in frame.columns:
            frame[col] = frame[col].astype("string").fillna("").astype("category")
    return frame


def _shape_list(data_shapes: Any, comparison: pd.DataFrame) -> list[tuple[int, int]]:
    from models.workloads import parse_shape

    shapes = set()
    for item in data_shapes:
        shapes.add(tuple(int(v) for v in (parse_shape(item) if isinstance(item, str) else item)))
    if not comparison.empty:
        pairs = comparison[["N", "K"]].drop_duplicates().itertuples(index=False)
        shapes.update((int(n), int(k)) for n, k in pairs)
    return sorted(shapes, key=lambda s: (-(s[0] * s[1]), s))


def _model_shapes(keys: list[str]) -> set[tuple[int, int]]:
    from models.workloads import get_model

    out = set()
    for key in keys:
        out.update((int(layer.N), int(layer.K)) for layer in get_model(key).layers)
    return out


def _valid_pairs(schemes: list[str], shapes: list[tuple[int, int]]) -> list[tuple[str, int, int]]:
    """(scheme, N, K) combinations the accounting accepts (K divisible by the scheme's group size)."""
    from models.schemes import check_group, get_scheme

    out = []
    for name in schemes:
        scheme = get_scheme(name)
        for n, k in shapes:
            try:
                check_group(scheme, k)
            except InputError:
                continue
            out.append((name, n, k))
    return out


def predict_grid(
    gpu_keys: list[str], shapes: list[tuple[int, int]], calibrations: dict[str, Any], batches: tuple[int, ...],
    params: Any = None,
) -> pd.DataFrame:
    """Predictions for every GPU × scheme × batch × shape (one vectorized call of the analysis layer's predict_tiers),
    with the kernel tier of the fastest registered kernel per scheme."""
    from models.schemes import SCHEME_NAMES
    from workbench.analysis.kernel_tier import predict_tiers

    combos = _valid_pairs(list(SCHEME_NAMES), shapes)
    if not gpu_keys or not combos:
        return pd.DataFrame(columns=["gpu", "scheme", "M", "N", "K"])
    scheme = np.array([c[0] for c in combos], dtype=object)
    n = np.array([c[1] for c in combos], dtype=np.int64)
    k = np.array([c[2] for c in combos], dtype=np.int64)
    m = np.asarray(batches, dtype=np.int64)
    g = np.asarray(gpu_keys, dtype=object)
    n_c, n_m, n_g = len(combos), len(m), len(g)
    points = pd.DataFrame(
        {
            "gpu": np.repeat(g, n_c * n_m),
            "scheme": np.tile(np.repeat(scheme, n_m), n_g),
            "M": np.tile(m, n_c * n_g),
            "N": np.tile(np.repeat(n, n_m), n_g),
            "K": np.tile(np.repeat(k, n_m), n_g),
        }
    )
    # the kernel tier: the fastest registered kernel of each scheme at each M on each GPU (kernel_predicted)
    pred = predict_tiers(points, calibrations, table=params)
    pred = pred.rename(columns={"gpu": "gpu_key"}) if "gpu_key" not in pred.columns else pred
    return _categorize(pred.reset_index(drop=True))


def public_grid(data_dir: Path, calibrations: dict[str, Any], params: Any = None) -> pd.DataFrame:
    """The public rows under <data_dir>/public/ (load_public), each with its predicted tiers
    (gpu_check.public_predictions): the roofline tiers, and time_kernel_s of the row's own kernel where the model
    knows it (the fastest modeled kernel of the scheme elsewhere), kernel_predicted naming it."""
    from workbench.analysis.gpu_check import public_predictions
    from workbench.storage.public import load_public

    public = load_public(data_dir)
    if public.empty:
        return public
    pred = public_predictions(public, calibrations, params)
    out = public.copy()
    for col in (*TIER_COLUMNS.values(), "kernel_predicted"):
        if col in pred.columns:
            out[col] = pred[col].to_numpy()
    return _categorize(out.reset_index(drop=True))


def rollup_grid(model_keys: list[str], gpu_keys: list[str], calibrations: dict[str, Any]) -> pd.DataFrame:
    """Predicted whole-model decode steps for every model, GPU and scheme (all tiers), one call per model."""
    from models.rollup import rollup
    from models.schemes import SCHEME_NAMES

    parts = []
    for key in model_keys:
        try:
            parts.append(rollup(key, gpu_keys, list(SCHEME_NAMES), list(BATCH_GRID), calibrations=calibrations or None))
        except InputError:  # a scheme whose group size does not divide a layer: roll up the others one by one
            for scheme in SCHEME_NAMES:
                try:
                    parts.append(rollup(key, gpu_keys, [scheme], list(BATCH_GRID), calibrations=calibrations or None))
                except InputError:
                    continue
    if not parts:
        return pd.DataFrame(columns=["model", "gpu", "scheme", "batch"])
    out = pd.concat(parts, ignore_index=True).rename(columns={"gpu": "gpu_key"})
    return _categorize(out.astype({"model": "string"}).astype({"model": "category"}))


def kernel_rollup(data: DashboardData, model: str, gpu: str) -> pd.DataFrame:
    """The kernel tier's whole-model roll-up of `model` on `gpu`, every scheme on BATCH_GRID, in `rollups`' columns
    (time_step_kernel_s: the fastest registered kernel of the scheme per layer; NaN where a scheme has none)."""
    key = (model, gpu)
    if key not in data.kernel_rollups:
        from models.schemes import SCHEME_NAMES
        from workbench.analysis.model_tier import model_steps_kernel_tier

        steps = model_steps_kernel_tier(model, gpu, list(SCHEME_NAMES), list(BATCH_GRID), data.calibrations,
                                        data.params)
        data.kernel_rollups[key] = pd.DataFrame({"model": model, "gpu_key": gpu, "scheme": steps["scheme"],
                                                 "batch": steps["batch"], "time_step_kernel_s": steps["time_step_s"],
                                                 "bytes_step": steps["bytes_step"]})
    return data.kernel_rollups[key]


def _load_hypotheses(data_dir: Path, comparison: pd.DataFrame) -> pd.DataFrame:
    from workbench.analysis import hypotheses

    return pd.DataFrame(hypotheses.evaluate_all(data_dir=data_dir, comparison=comparison))


def build_data(data_dir: str | Path) -> DashboardData:
    """Load and precompute everything for one data directory (use `load_data` for the cached version)."""
    from models.hardware import load_calibrations, load_gpus
    from models.workloads import SHAPES, model_keys
    from workbench.analysis.code_drift import code_drift
    from workbench.analysis.compare import compare_points, latest_points
    from workbench.analysis.kernel_tier import params_for
    from workbench.storage.store import load_measurements

    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(f"data directory {data_dir} does not exist; pass --data-dir pointing at a workbench data/")
    notes: list[str] = []
    gpus = load_gpus()
    calibrations = load_calibrations(data_dir) if (data_dir / "calibration").is_dir() else {}
    has_measurements = (data_dir / "measurements").is_dir()
    measurements = load_measurements(data_dir) if has_measurements else load_measurements([])
    params = params_for(data_dir)  # its own fitted parameters, when model-fit wrote them there
    comparison = compare_points(measurements, calibrations=calibrations, params=params)
    latest = latest_points(comparison)
    keys = list(model_keys())
    shapes = _shape_list(SHAPES.values() if isinstance(SHAPES, dict) else SHAPES, comparison)
    grid_shapes = sorted(set(shapes) | _model_shapes(keys))
    batches = tuple(sorted(set(BATCH_GRID) | set(int(m) for m in comparison["M"].unique())))
    predictions = predict_grid(list(gpus), grid_shapes, calibrations, batches, params)
    try:
        public = public_grid(data_dir, calibrations, params)
    except (InputError, OSError) as exc:
        public = pd.DataFrame()
        notes.append(f"public timings not loaded: {str(exc).splitlines()[0]}")
    try:
        # evaluated on the newest run of each point: the evaluator keeps only those anyway (best_per_scheme)
        verdicts = _load_hypotheses(data_dir, latest)
    except (InputError, ImportError, OSError) as exc:
        verdicts = pd.DataFrame()
        notes.append(f"hypotheses not evaluated: {str(exc).splitlines()[0]}")
    return DashboardData(
        data_dir=data_dir,
        gpus=gpus,
        calibrations=dict(calibrations),
        measurements=_categorize(measurements),
        comparison=_categorize(comparison),
        latest=_categorize(latest),
        predictions=predictions,
        shapes=shapes,
        model_keys=keys,
        hypotheses=verdicts,
        rollups=rollup_grid(keys, list(gpus), calibrations),
        params=params,
        code_drift=code_drift(measurements),
        notes=notes,
        public=public,
    )


@functools.lru_cache(maxsize=4)
def _cached(resolved: str) -> DashboardData:
    return build_data(resolved)


def load_data(data_dir: str | Path | None = None) -> DashboardData:
    """The data of one directory (None: models.paths.dataset_dir()), built once per process and shared by every
    request."""
    return _cached(str(Path(data_dir or dataset_dir()).resolve()))


# ---------------------------------------------------------------------------------------------------- uploads
class UploadRegistry:
    """Uploaded measurement files, server-side, keyed by a random token the browser session keeps in a dcc.Store.

    Bounded (oldest dropped first) so a long-running server does not grow without limit.
    """

    def __init__(self, limit: int = MAX_UPLOADS) -> None:
        self._items: OrderedDict[str, Upload] = OrderedDict()
        self._lock = threading.Lock()
        self._limit = limit

    def add(self, upload: Upload) -> str:
        token = uuid.uuid4().hex
        with self._lock:
            self._items[token] = upload
            while len(self._items) > self._limit:
                self._items.popitem(last=False)
        return token

    def get(self, tokens: tuple[str, ...]) -> list[Upload]:
        with self._lock:
            return [self._items[t] for t in tokens if t in self._items]


def parse_upload(data: DashboardData, filename: str, content: bytes) -> Upload:
    """Validate an uploaded Parquet/CSV measurement file (type, size, columns, values) and join it with the
    predictions, its kernels tagged with the file name (InputError if bad)."""
    from workbench.analysis.compare import compare_points
    from workbench.interfaces.dashboard.uploads import read_measurements, tag_source

    measurements = read_measurements(filename, content)
    comparison = compare_points(measurements, calibrations=data.calibrations, params=data.params)  # real kernel names
    if comparison.empty:
        raise InputError(f"{filename}: no point is on a GPU of the catalogue (gpu_key empty or unknown)")
    return Upload(
        filename, _categorize(tag_source(measurements, filename)), _categorize(tag_source(comparison, filename))
    )


@dataclass(frozen=True)
class Frames:
    """The measured frames a session sees: the shipped data plus its uploads. The views draw `latest` (the newest
    run of each point); the data table lists every row of `comparison`."""

    measurements: pd.DataFrame
    comparison: pd.DataFrame
    latest: pd.DataFrame
    uploads: tuple[str, ...] = ()

    @functools.cached_property
    def best(self) -> pd.DataFrame:
        """`latest` cut to the fastest kernel of each scheme at each point (compare.best_per_scheme), ranked once per
        session frames instead of once per figure (views.measured_rows)."""
        from workbench.analysis.compare import best_per_scheme

        return best_per_scheme(self.latest)

    def rows(self, name: str) -> RowIndex:
        """The row index of one of these frames ("measurements", "comparison", "latest" or "best"), built on first
        use."""
        built = self.__dict__.setdefault("_rows", {})
        if name not in built:
            built[name] = row_index(getattr(self, name))
        return built[name]


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    plain = [f.astype({c: "string" for c in CATEGORY_COLUMNS if c in f.columns}) for f in frames]
    return _categorize(pd.concat(plain, ignore_index=True))


def session_frames(data: DashboardData, uploads: list[Upload]) -> Frames:
    """The shipped frames with the session's uploads appended (categoricals rebuilt over the union)."""
    from workbench.analysis.compare import latest_points

    if not uploads:
        return Frames(data.measurements, data.comparison, data.latest)
    comparison = _concat([data.comparison] + [u.comparison for u in uploads])
    return Frames(
        _concat([data.measurements] + [u.measurements for u in uploads]),
        comparison,
        _categorize(latest_points(comparison)),
        tuple(u.filename for u in uploads),
    )
