"""Datasets as the pages see them: cached access to queries, uploads and the Data page's admin actions."""
