"""The job explorer's CSV download route: the filtered jobs streamed as CSV (dashboard filters plus grid model)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from flask import Response, request

from analytics.filters import check_known, parse_params, resolve_range, to_filter
from analytics.queries import explorer as explorer_queries
from analytics.store import DatasetError
from components.datasets import access

EXPORT_PATH = "/download/jobs.csv"


def _json_arg(args: dict[str, str], key: str, default: str) -> Any:
    """A JSON-encoded query parameter, with a one-line message when it is not valid (or too deeply nested) JSON."""
    try:
        return json.loads(args.get(key) or default)
    except (ValueError, RecursionError):
        raise explorer_queries.GridFilterError(f"{key} is not valid JSON") from None


def csv_view() -> Response:
    """Flask view streaming the filtered jobs as CSV (query: dashboard filters plus grid filter/sort as JSON)."""
    args = request.args.to_dict()
    try:
        state, problems = parse_params(args, access.settings().default_dataset)
        ds = access.open_dataset(state["dataset"])
        problems += check_known(state, access.known_values(ds.name))
        if problems:
            raise ValueError(problems[0])
        resolve_range(state, access.last_submit(ds.name), datetime.now())
        flt = to_filter(state)
        fmodel = _json_arg(args, "grid_filter", "{}")
        smodel = _json_arg(args, "grid_sort", "[]")
        explorer_queries.grid_where(fmodel)
        explorer_queries.order_by(smodel)
    except (ValueError, DatasetError) as exc:
        message = " ".join(str(exc).split())
        message = message if len(message) <= 300 else message[:297] + "..."
        return Response(f"cannot export: {message}\n", status=400, mimetype="text/plain")
    headers = {"Content-Disposition": f'attachment; filename="{ds.name}-jobs.csv"'}
    return Response(explorer_queries.export_chunks(ds, flt, fmodel, smodel), mimetype="text/csv", headers=headers)
