"""A figure's bottom margin fitted to its legend's rows at the card's width (components/charts/margins.py)."""

from __future__ import annotations

import copy

import plotly.graph_objects as go
import pytest

from components.charts import figures, margins

# Widths of legend texts at 13 px in DejaVu Sans, the widest system-ui font (measured in Chromium, canvas measureText)
DEJAVU_13PX = {
    "alibaba Alibaba-openb": 146,
    "helios-synth Earth": 118,
    "helios-synth Saturn": 126,
    "helios-synth Uranus": 129,
    "helios-synth Venus": 122,
    "philly Philly": 74,
}


def figure_with(names: list[str], **layout) -> dict:
    """A styled figure (the template's foot legend) with a line per name, as the browser gets it."""
    fig = go.Figure([go.Scatter(x=[0, 1], y=[0, 1], name=n) for n in names])
    figures.style(fig, "a title", "an x title", "a y title")
    return fig.update_layout(**layout).to_plotly_json()


def test_entries_share_a_row_while_they_fit_and_wrap_at_the_widest_entrys_width():
    widths = list(DEJAVU_13PX.values())
    assert margins.legend_rows(widths, 1200) == 1  # 955 px of entries and gaps fit
    assert margins.legend_rows(widths, 592) == 2  # 3 of the widest (186 + 5 px) a row: as plotly drew it at 1440 px
    assert margins.legend_rows(widths, 258) == 6  # one a row on a phone
    assert margins.legend_rows([], 600) == 0
    assert margins.legend_rows([500], 100) == 1  # an entry wider than the plot still takes one row


def test_text_is_as_wide_as_dejavu_sans_sets_it_scaled_to_the_readers_font():
    for text, px in DEJAVU_13PX.items():
        assert margins.text_px(text, 13) == pytest.approx(px, abs=1)
        assert margins.text_px(text, 13, scale=0.9) == pytest.approx(0.9 * margins.text_px(text, 13))


def test_the_readers_font_is_scaled_by_the_sample_it_measured():
    dejavu_px = sum(margins.DEJAVU_EM100[c] for c in margins.TEXT_SAMPLE)  # the sample at 100 px in DejaVu Sans
    assert margins.text_scale(dejavu_px) == 1.0
    assert margins.text_scale(str(0.9 * dejavu_px)) == pytest.approx(0.9)
    assert margins.text_scale(1) == margins.TEXT_SCALE_BOUNDS[0] and margins.text_scale(10**9) == 1.4
    for unread in (None, "", "nan", "1e999", "<script>", "-inf"):
        assert margins.text_scale(unread) == margins.TEXT_SCALE_BOUNDS[0]  # unmeasured: the narrowest


def test_a_wrapping_legend_gets_its_rows_at_once_and_nothing_else_changes():
    names = list(DEJAVU_13PX)
    figure = figure_with(names)
    before = copy.deepcopy(figure)
    base_px = figure["layout"]["margin"]["b"]
    assert margins.fitted(figure, 1600) is figure  # one row: as styled
    two = margins.fitted(figure, 600)
    assert two["layout"]["margin"]["b"] == base_px + 20  # a row of 19.9 px at 13 px, rounded up (plotly: 95 px)
    assert margins.fitted(figure, 250)["layout"]["margin"]["b"] == base_px + 100  # six rows
    assert margins.fitted(figure, 700)["layout"]["margin"]["b"] == base_px + 20
    assert margins.fitted(figure, 700, scale=0.5) is figure  # in a font half as wide the entries share one row
    assert two["data"] is figure["data"] and figure == before  # the cached figure is not changed


@pytest.mark.parametrize(
    "layout",
    [
        {"showlegend": False},
        {"legend": {"orientation": "v"}},
        {"legend": {"y": -0.2, "yref": "paper"}},
        {"xaxis": {"rangeslider": {"visible": True}}},  # a range slider makes its own room
    ],
)
def test_a_figure_without_the_foot_legend_is_left_as_it_is(layout):
    figure = figure_with(list(DEJAVU_13PX), **layout)
    assert margins.fitted(figure, 300) is figure


def test_a_legend_taller_than_plotly_lets_it_be_or_grouped_is_left_to_plotly():
    names = [f"entry {i}" for i in range(12)]
    assert margins.fitted(figure_with(names[:9]), 100)["layout"]["margin"]["b"] > 75  # 9 rows: 189 of 380 px
    assert margins.fitted(figure_with(names[:10]), 100)["layout"]["margin"]["b"] == 75  # 10 would scroll in plotly
    grouped = figure_with(list(DEJAVU_13PX))
    grouped["data"][0]["legendgroup"] = "a"
    assert margins.fitted(grouped, 300) is grouped  # a grouped legend wraps by its groups' widths
    in_groups = figure_with(list(DEJAVU_13PX), legend={"traceorder": "grouped"})
    assert margins.fitted(in_groups, 300) is in_groups


def test_a_single_trace_draws_no_legend_and_keeps_its_margin():
    figure = figure_with(["alibaba Alibaba-openb"])
    assert margins.fitted(figure, 100) is figure


def test_a_half_card_is_half_the_row_from_the_lg_breakpoint_on():
    assert margins.card_plot_width_px(1440, wide=False) == 600  # plotly drew 592 px
    assert margins.card_plot_width_px(1440, wide=True) == 1320  # 1308 px
    assert margins.card_plot_width_px(390, wide=False) == margins.card_plot_width_px(390, wide=True) == 270  # 258 px
    assert margins.card_plot_width_px("junk", wide=False) == margins.card_plot_width_px(1920, wide=False)
