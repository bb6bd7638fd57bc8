"""Celery entry point: `celery -A components.commands.celery_worker worker -P threads` runs the background jobs.

Building the app (with HELIOS_REDIS_URL set) registers every background callback as a Celery task under the same
name as in the gunicorn hosts, so any worker can run a job that any host queued.
"""

from __future__ import annotations

import app as dashboard

celery = dashboard.app._background_manager.handle
