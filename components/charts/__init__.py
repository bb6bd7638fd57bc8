"""Figure cards: pure Plotly builders (figures), the chart registry that fetches their data, published overlays."""
