"""The what-if panel: form (ids, layout, values), form state and URL, runs and their cache, callbacks, sweep."""
