"""The calibrated synthetic Helios trace: distributions (dist), VC layout, final states, heavy-job levelling, build."""
