"""Every figure view on the shipped data with the largest selections the controls allow (every GPU, every scheme,
every kernel): each one draws, its subplots inside the figure (CPU only).

Found this way: the attribution view of every kernel (38 panels, 13 rows) and the MoE view of every GPU (13 columns)
asked plotly for axis domains outside [0, 1]; the ValueError was turned into a silent no-op by the callback guard."""

from __future__ import annotations

import pytest

pytest.importorskip("dash")

from models.schemes import SCHEME_NAMES  # noqa: E402
from workbench.interfaces.dashboard import callbacks, ids, views_moe  # noqa: E402
from workbench.interfaces.dashboard.data import load_data  # noqa: E402
from workbench.interfaces.dashboard.queries import control_options, default_selection  # noqa: E402

ERROR_NOTE = "could not be drawn"


@pytest.fixture(scope="module")
def shipped() -> callbacks.AppState:
    return callbacks.AppState(load_data(None))


def _maximal(state: callbacks.AppState, **over) -> tuple:
    d = default_selection(state.data)
    opts = control_options(state.data)
    values = {
        "gpus": [o["value"] for o in opts["gpus"]], "primary": "h200-sxm", "schemes": list(SCHEME_NAMES),
        "kernels": [], "kernel_view": "all", "shape": d.shape, "m_lo": 1, "m_hi": 256, "baseline": d.baseline,
        "tier": d.tier, "mode": d.mode,
    }  # fmt: skip
    values.update(over)
    return tuple(values.values())


def _assert_inside(fig) -> None:
    layout = fig.to_plotly_json()["layout"]
    domains = {name: axis["domain"] for name, axis in layout.items() if name[1:5] == "axis" and "domain" in axis}
    for name, (lo, hi) in domains.items():
        assert 0.0 <= lo < hi <= 1.0, (name, lo, hi)
    notes = " ".join(str(a.get("text", "")) for a in layout.get("annotations", []))
    assert ERROR_NOTE not in notes, notes


@pytest.mark.parametrize("primary", ["h200-sxm", "h100-sxm"])
def test_attribution_of_every_kernel_and_scheme_fits(shipped, primary):
    fig = callbacks.view_figure(shipped, "attribution", _maximal(shipped, primary=primary), [], "time")
    _assert_inside(fig)
    panels = [a for a in fig.layout.annotations if a.yref == "paper"]
    assert len(panels) > 25  # one panel per measured kernel: 9 rows and more of 3
    assert {t.name for t in fig.data} >= {"memory", "unexplained remainder (measured − predicted)"}


def test_attribution_with_every_kernel_chosen_by_name_fits(shipped):
    kernels = [o["value"] for o in control_options(shipped.data)["kernels"]]
    _assert_inside(callbacks.view_figure(shipped, "attribution", _maximal(shipped, kernels=kernels), [], "time"))


def test_moe_view_of_every_gpu_fits(shipped):
    controls = _maximal(shipped, kernel_view="best")
    fig = callbacks.view_figure(shipped, "moe", controls, [], "time", (views_moe.default_model(), "experts", "uniform"))
    _assert_inside(fig)
    assert len([a for a in fig.layout.annotations if a.yref == "paper"]) == len(controls[0])  # a column per GPU


@pytest.mark.parametrize(
    ("view", "compare_view"),
    [(v, "time") for v in ids.FIGURES if v not in ("moe", "compare")] + [("compare", c) for c in ids.COMPARE_VIEWS],
)
@pytest.mark.parametrize("kernel_view", ["all", "best"])
def test_every_view_draws_the_maximal_selection(shipped, view, compare_view, kernel_view):
    fig = callbacks.view_json(shipped, view, _maximal(shipped, kernel_view=kernel_view), [], compare_view)
    assert fig["data"] or fig["layout"].get("annotations")
    _assert_inside(callbacks.view_figure(shipped, view, _maximal(shipped, kernel_view=kernel_view), [], compare_view))
