"""The Dash user interface: pages, figures and shared controls."""
