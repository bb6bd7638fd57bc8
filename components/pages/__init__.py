"""One module per dashboard page, each owning its dash.register_page, layout and callbacks."""
