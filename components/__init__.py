"""The Dash user interface: pages, shell, charts, explorer, what-if panel, dataset access and server plumbing."""
