"""What-if scenarios: several scheduling policies (and optionally CES) over one window, compared with the record.

`config` holds the validated configuration and the request that binds it to a dataset version and a cache key,
`run` the runner, `outputs` the comparison outputs and `energy` the CES part.
"""

from sim.scenario.config import (
    DEFAULT_POLICIES,
    RECORDED,
    TWIN,
    CesOptions,
    ScenarioConfig,
    ScenarioError,
    ScenarioRequest,
    check_applicable,
    check_limit,
    config_from_dict,
    config_inputs,
    config_to_dict,
    open_request,
    scenario_inputs,
    scenario_key,
    twin_pairs,
    validate,
)
from sim.scenario.outputs import ScenarioResult, records_timeline
from sim.scenario.run import (
    LADDER,
    ProgressCallback,
    predictions_and_importance,
    run_request,
    run_scenario,
    simulate,
    wants_scheduler,
)

__all__ = [
    "DEFAULT_POLICIES",
    "LADDER",
    "RECORDED",
    "TWIN",
    "CesOptions",
    "ProgressCallback",
    "ScenarioConfig",
    "ScenarioError",
    "ScenarioRequest",
    "ScenarioResult",
    "check_applicable",
    "check_limit",
    "config_from_dict",
    "config_inputs",
    "config_to_dict",
    "open_request",
    "predictions_and_importance",
    "records_timeline",
    "run_request",
    "run_scenario",
    "scenario_inputs",
    "scenario_key",
    "simulate",
    "twin_pairs",
    "validate",
    "wants_scheduler",
]
