"""Server plumbing: settings, query cache, authentication, users, health, request log, errors, background jobs."""
