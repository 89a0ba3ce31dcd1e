"""style.compose's grid arithmetic: every cell's domain inside [0, 1] for any number of rows or columns, the gaps
asked for kept where they fit (no app, no data directory)."""

from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("plotly")

from workbench.interfaces.dashboard import fig_breakdown, style  # noqa: E402


def _panels(n: int) -> list[style.Panel]:
    return [style.Panel([{"type": "bar", "x": ["1"], "y": [1.0]}], {}, {}, f"p{i}") for i in range(n)]


def _domains(fig, axis: str) -> list[tuple[float, float]]:
    """(start, end) of every `axis` ("x" or "y") in subplot order."""
    layout = fig.layout
    n = sum(1 for name in layout.to_plotly_json() if name.startswith(f"{axis}axis"))
    return [tuple(layout[f"{axis}axis" if i == 1 else f"{axis}axis{i}"].domain) for i in range(1, n + 1)]


def _assert_grid(fig, rows: int, cols: int) -> None:
    """Domains in [0, 1], cells of positive size, columns left to right and rows top to bottom without overlap."""
    xs, ys = _domains(fig, "x"), _domains(fig, "y")
    for lo, hi in xs + ys:
        assert 0.0 <= lo < hi <= 1.0, (lo, hi)
    row_spans = [ys[r * cols] for r in range(rows)]
    col_spans = [xs[c] for c in range(min(cols, len(xs)))]
    assert all(below[1] < above[0] for above, below in zip(row_spans, row_spans[1:], strict=False))
    assert all(left[1] < right[0] for left, right in zip(col_spans, col_spans[1:], strict=False))


@pytest.mark.parametrize(("n", "cols"), [(38, 3), (100, 3), (9, 1), (13, 13), (40, 40)])
def test_many_rows_or_columns_fit_in_the_figure(n, cols):
    rows = -(-n // cols)
    # vspace 0.14 over 13 rows asked for 1.68 of the figure: the first row's domain started at 1.05 (plotly ValueError)
    fig = style.compose(_panels(n), rows, cols, {}, hspace=0.08, vspace=0.14)
    _assert_grid(fig, rows, cols)
    ys, xs = _domains(fig, "y"), _domains(fig, "x")
    cells = sum(ys[r * cols][1] - ys[r * cols][0] for r in range(rows))
    assert cells == pytest.approx(1.0 - (rows - 1) * style.fit_gap(0.14, rows))
    assert cells >= style.MIN_CELLS_SHARE - 1e-9
    assert sum(hi - lo for lo, hi in xs[:cols]) >= style.MIN_CELLS_SHARE - 1e-9


def test_gaps_that_fit_are_kept():
    fig = style.compose(_panels(4), 2, 2, {}, hspace=0.1, vspace=0.16)
    assert _domains(fig, "y")[0] == pytest.approx((0.58, 1.0)) and _domains(fig, "y")[2] == pytest.approx((0.0, 0.42))
    assert _domains(fig, "x")[0] == pytest.approx((0.0, 0.45)) and _domains(fig, "x")[1] == pytest.approx((0.55, 1.0))


def test_fit_gap_shrinks_only_gaps_that_would_crowd_out_the_cells():
    assert style.fit_gap(0.14, 1) == 0.14
    assert style.fit_gap(0.14, 5) == 0.14  # 4 gaps: 0.56, cells keep 0.44
    assert style.fit_gap(0.06, 13) == 0.06  # a 13-GPU facet: 0.72, as before
    assert style.fit_gap(0.14, 13) == pytest.approx((1 - style.MIN_CELLS_SHARE) / 12)


def test_pixel_gap_is_the_same_on_screen_for_any_height():
    assert style.pixel_gap(90, 760, 120) == pytest.approx(90 / 640)
    assert style.pixel_gap(90, 4940, 120) * (4940 - 120) == pytest.approx(90)


def _attribution_frame(n: int) -> pd.DataFrame:
    rows = []
    for i in range(n):
        for m in (1, 16):
            rows.append({"label": f"kernel_{i:02d}", "kernel": f"kernel_{i:02d}", "M": m, "attr_fixed_s": 2e-6,
                         "attr_memory_s": 20e-6, "attr_alu_s": 1e-6, "attr_tensor_s": 0.0, "attr_fixup_s": 0.0,
                         "attr_remainder_s": -1e-6})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("n", [2, 6, 38, 120])
def test_attribution_panels_fit_with_the_same_gap_between_rows(n):
    fig = fig_breakdown.attribution_figure(_attribution_frame(n), title="t")
    cols = min(3, n)
    rows = -(-n // cols)
    _assert_grid(fig, rows, cols)
    ys = _domains(fig, "y")
    margin = style.BASE_LAYOUT["margin"]
    plot_px = fig.layout.height - margin["t"] - margin["b"]
    if rows > 1:
        gap_px = (ys[0][0] - ys[cols][1]) * plot_px
        assert gap_px == pytest.approx(fig_breakdown.ROW_GAP_PX, abs=1e-3)
        cell_px = (ys[0][1] - ys[0][0]) * plot_px
        assert cell_px > 200  # each row keeps a readable height however many there are
