"""The what-if form state: a JSON-safe dict that round-trips through the URL and becomes a ScenarioConfig."""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import urlencode

from analytics.filters import parse_params, split_values, to_params
from sim import placers, policies
from sim.ces.energy import ENERGY_PARAMS, EnergyParams
from sim.ces.policy import POLICY_PARAMS, PRESETS
from sim.ces.run import MODES
from sim.estimators import ESTIMATORS
from sim.scenario import CesOptions, ScenarioConfig, ScenarioError, check_limit, twin_pairs, validate
from sim.slurm.knobs import ACCOUNT_GPUS, KNOBS, MERGE, check_knob, param_of

NUMBER_KEYS: dict[str, str] = {"noise": "noise_level", "load": "load_factor", "cap": "capacity_scale"}
TWIN_PREFIX = "t_"  # URL parameters of the Slurm twin's knobs: t_weight_fairshare=0, t_account_gpus.nlp=4
MAX_NAMED_KNOBS = 50  # account GPU caps and partition merges one scenario may set
MAX_CAPS_CHARS = 2000  # the form's text of account caps


DEFAULTS = ScenarioConfig()  # the scenario a fresh form describes (bar the dataset, cluster, window and CES preset)
FALLBACK_PRESET = "philly"  # the CES preset of a cluster that has none named after it


def default_form(dataset: str = "", cluster: str = "", start: str | None = None, end: str | None = None) -> dict:
    """The form of a fresh what-if page: the default scenario (four policies, history predictor, CES off)."""
    return {
        "dataset": dataset,
        "cluster": cluster,
        "vcs": [],
        "start": start,
        "end": end,
        "policies": list(DEFAULTS.policies),
        "placer": DEFAULTS.placer,
        "backfill": DEFAULTS.backfill,
        "estimator": DEFAULTS.estimator,
        "noise_level": DEFAULTS.noise_level,
        "load_factor": DEFAULTS.load_factor,
        "capacity_scale": DEFAULTS.capacity_scale,
        "ladder": DEFAULTS.ladder,
        "twin_baseline": DEFAULTS.twin_baseline,
        "ces_enabled": DEFAULTS.ces.enabled,
        "ces_preset": default_preset(cluster),
        "ces_mode": DEFAULTS.ces.mode,
        "ces_schedule": DEFAULTS.ces.schedule,
        "ces_policy": {},
        "ces_energy": {},
        "twin": {},
    }


def default_preset(cluster: str) -> str:
    """The CES preset named after the cluster, else philly's."""
    name = cluster.lower() if isinstance(cluster, str) else ""
    return name if name in PRESETS else FALLBACK_PRESET


def _number(params: dict[str, str], key: str, problems: list[str]) -> float | None:
    try:
        return float(params[key])
    except ValueError:
        problems.append(f"URL parameter {key}={params[key]!r} is not a number; ignored")
        return None


def _check_bound(key: str, field: str, value: float | None, problems: list[str]) -> None:
    """Report a URL number outside the bounds every scenario is held to (it stays in the form, refused at run)."""
    if value is None:
        return
    try:
        check_limit(field, value)
    except ScenarioError as exc:
        problems.append(f"URL parameter {key}: {exc}")


def _choice(params: dict[str, str], key: str, allowed, problems: list[str]) -> str | None:
    value = params[key]
    if value in allowed:
        return value
    problems.append(f"URL parameter {key}={value!r} must be one of {', '.join(allowed)}; ignored")
    return None


def _numbers(params: dict[str, str], prefix: str, names: tuple[str, ...], problems: list[str]) -> dict:
    out = {}
    for name in names:
        key = prefix + name
        if key in params:
            value = _number(params, key, problems)
            if value is not None:
                out[name] = value
    return out


# (URL key, form field) of the on/off controls: 0 or 1 in the link, true or false in the form
URL_SWITCHES = (("bf", "backfill"), ("ladder", "ladder"), ("tb", "twin_baseline"), ("ces", "ces_enabled"))


def form_from_params(params: dict[str, str], base: dict) -> tuple[dict, list[str]]:
    """Overlay URL query parameters (one string per key) on a base form; returns the form and the problems."""
    form, problems = dict(base), []
    shared, _ = parse_params(params)  # the filter bar's keys; the shell reports their problems
    form.update(
        {k: v for k, v in (("dataset", shared["dataset"]), ("start", shared["start"]), ("end", shared["end"])) if v}
    )
    if shared["clusters"]:
        form["cluster"] = shared["clusters"][0]  # the shell's filter bar may list several clusters
    if "vc" in params:
        form["vcs"] = shared["vcs"]
    if "pol" in params:
        chosen = split_values(params["pol"])
        unknown = policies.split_names(chosen)[1]
        form["policies"] = [p for p in chosen if p not in unknown]
        if unknown:
            problems.append(f"URL parameter pol: unknown policy {', '.join(unknown)}; ignored")
    choices = {
        "placer": ("placer", tuple(placers.PLACERS)),
        "est": ("estimator", tuple(ESTIMATORS)),
        "cpre": ("ces_preset", tuple(PRESETS)),
        "cmode": ("ces_mode", MODES),
    }
    for key, (field, allowed) in choices.items():
        if key in params:
            value = _choice(params, key, allowed, problems)
            form[field] = value if value is not None else form[field]
    for key, field in NUMBER_KEYS.items():
        if key in params:
            value = _number(params, key, problems)
            form[field] = value if value is not None else form[field]
            _check_bound(key, field, value, problems)
    for key, field in URL_SWITCHES:
        if key in params and params[key] in ("0", "1"):
            form[field] = params[key] == "1"
        elif key in params:
            problems.append(f"URL parameter {key}={params[key]!r} must be 0 or 1; ignored")
    if "csched" in params:
        form["ces_schedule"] = params["csched"]
    form["ces_policy"] = _numbers(params, "c_", POLICY_PARAMS, problems) or form["ces_policy"]
    form["ces_energy"] = _numbers(params, "e_", ENERGY_PARAMS, problems) or form["ces_energy"]
    form["twin"] = _twin_overrides(params, problems) or form.get("twin", {})
    return form, problems


def _twin_overrides(params: dict[str, str], problems: list[str]) -> dict:
    """The twin's knobs of the URL (t_<knob>); one out of bounds stays in the form (refused at run), named."""
    named = tuple(k.removeprefix(TWIN_PREFIX) for k in params if param_of(k.removeprefix(TWIN_PREFIX)) is not None)
    knobs = _numbers(params, TWIN_PREFIX, (*KNOBS, *named[:MAX_NAMED_KNOBS]), problems)
    for name, value in knobs.items():
        try:
            check_knob(name, value)
        except ValueError as exc:
            problems.append(f"URL parameter {TWIN_PREFIX}{name}: {exc}")
    return knobs


def _short(value: float) -> str:
    return f"{value:g}"


def form_to_params(form: dict) -> dict[str, str]:
    """The URL query parameters that encode a form (plus run=1, which makes the page run it on load)."""
    scope = {"dataset": form["dataset"], "clusters": [form["cluster"]], "vcs": form.get("vcs") or []}
    params = to_params({**scope, "start": form.get("start"), "end": form.get("end")})
    params["pol"] = ",".join(form.get("policies") or [])
    params["placer"] = form["placer"]
    params["bf"] = "1" if form.get("backfill") else "0"
    params["est"] = form["estimator"]
    for key, field in NUMBER_KEYS.items():
        params[key] = _short(float(form[field]))
    if form.get("ladder"):
        params["ladder"] = "1"
    if not form.get("twin_baseline", True):
        params["tb"] = "0"
    if form.get("ces_enabled"):
        params.update(ces="1", cpre=form["ces_preset"], cmode=form["ces_mode"], csched=form["ces_schedule"])
        params.update({f"c_{k}": _short(float(v)) for k, v in sorted(form["ces_policy"].items())})
        params.update({f"e_{k}": _short(float(v)) for k, v in sorted(form["ces_energy"].items())})
    params.update({f"{TWIN_PREFIX}{k}": _short(float(v)) for k, v in sorted((form.get("twin") or {}).items())})
    params["run"] = "1"
    return params


def form_to_search(form: dict, kept: dict[str, str] | None = None) -> str:
    """The URL query string of a form, with the kept parameters (another part of the page's state) after it."""
    return "?" + urlencode({**form_to_params(form), **(kept or {})}, safe=",")


MAX_FORM_NUMBER = 10.0
MAX_CES_NUMBER = 1e6
MAX_TEXT_CHARS = 200
MAX_LIST_ITEMS = 1000
TEXT_FIELDS: tuple[str, ...] = ("dataset", "cluster", "placer", "estimator", "ces_preset", "ces_mode", "ces_schedule")


def _check_text(value: Any, field: str) -> None:
    if value is None:
        return
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS or not value.isprintable():
        raise ScenarioError(
            f"{field.replace('_', ' ')} must be a printable name of at most {MAX_TEXT_CHARS} characters"
        )


def check_form_types(form: dict) -> None:
    """Refuse (ScenarioError) form values a browser cannot send: non-text names, long lists, huge CES numbers."""
    for field in (*TEXT_FIELDS, "start", "end"):
        _check_text(form.get(field), field)
    for field in ("vcs", "policies"):
        items = form.get(field) or []
        if not isinstance(items, list) or len(items) > MAX_LIST_ITEMS:
            raise ScenarioError(f"{field} must be a list of at most {MAX_LIST_ITEMS} names")
        for item in items:
            _check_text(item, field)
    for _, field in URL_SWITCHES:
        if field in form and not isinstance(form[field], bool):
            raise ScenarioError(f"{field.replace('_', ' ')} must be true or false")
    twin = form.get("twin") or {}
    if not isinstance(twin, dict) or len(twin) > len(KNOBS) + MAX_NAMED_KNOBS:
        raise ScenarioError(f"the Slurm twin's settings must be at most {len(KNOBS) + MAX_NAMED_KNOBS} knobs")
    for group in ("ces_policy", "ces_energy"):
        for name, value in (form.get(group) or {}).items():
            if not -MAX_CES_NUMBER <= float(value) <= MAX_CES_NUMBER:
                raise ScenarioError(f"CES parameter {name} must be between -{MAX_CES_NUMBER:g} and {MAX_CES_NUMBER:g}")


def form_to_config(form: dict) -> ScenarioConfig:
    """The validated ScenarioConfig a form describes (raises ScenarioError with a one-line message)."""
    if not form.get("dataset"):
        raise ScenarioError("choose a dataset")
    check_form_types(form)
    try:
        numbers = {field: float(form[field]) for field in NUMBER_KEYS.values()}
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"load factor, capacity scale and noise level must be numbers ({exc})") from exc
    if not all(v <= MAX_FORM_NUMBER for v in numbers.values()):
        raise ScenarioError(f"load factor, capacity scale and noise level must be at most {MAX_FORM_NUMBER:g}")
    ces = CesOptions(
        enabled=bool(form.get("ces_enabled")),
        preset=form.get("ces_preset") or FALLBACK_PRESET,
        mode=form.get("ces_mode") or DEFAULTS.ces.mode,
        schedule=form.get("ces_schedule") or DEFAULTS.ces.schedule,
        policy=tuple(sorted((k, float(v)) for k, v in (form.get("ces_policy") or {}).items())),
        energy=tuple(sorted((k, float(v)) for k, v in (form.get("ces_energy") or {}).items())),
    )
    config = ScenarioConfig(
        dataset=form["dataset"],
        cluster=form.get("cluster") or "",
        vcs=tuple(form.get("vcs") or ()),
        start=form.get("start") or None,
        end=form.get("end") or None,
        policies=_policies(form.get("policies") or []),
        placer=form.get("placer") or DEFAULTS.placer,
        backfill=bool(form.get("backfill")),
        estimator=form.get("estimator") or DEFAULTS.estimator,
        ladder=bool(form.get("ladder")),
        twin_baseline=bool(form.get("twin_baseline", True)),
        ces=ces,
        twin=twin_pairs(form.get("twin") or {}),
        **numbers,
    )
    return validate(config)


def _policies(names: list[str]) -> tuple[str, ...]:
    try:
        return policies.check_names(names)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None


def overrides(values: list[Any], names: tuple[str, ...]) -> dict[str, float]:
    """The non-empty numeric inputs of a parameter group as {name: value}."""
    return {n: float(v) for n, v in zip(names, values, strict=True) if v not in (None, "")}


def preset_defaults(preset: str) -> dict[str, Any]:
    """The policy parameter values of a CES preset (shown as input placeholders)."""
    return dataclasses.asdict(PRESETS.get(preset, PRESETS[FALLBACK_PRESET]))


def energy_defaults() -> dict[str, Any]:
    """The default energy parameters (shown as input placeholders)."""
    return dataclasses.asdict(EnergyParams())


def account_caps(text: Any) -> dict[str, float]:
    """The form's account caps "nlp=4, speech=8" as twin knobs {"account_gpus.nlp": 4.0, ...} (ScenarioError naming
    the item that is not account=number)."""
    if not isinstance(text, str) or len(text) > MAX_CAPS_CHARS:
        raise ScenarioError(f"account GPU caps must be a text of at most {MAX_CAPS_CHARS} characters")
    caps = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        account, sep, value = item.partition("=")
        try:
            gpus = float(value) if sep and account.strip() else None
        except ValueError:
            gpus = None
        if gpus is None:
            raise ScenarioError(f"account GPU cap {item!r}: expected account=GPUs, e.g. nlp=4")
        caps[f"{ACCOUNT_GPUS}.{account.strip()}"] = gpus
    return caps


def merges(text: Any) -> dict[str, float]:
    """The form's merged partitions "short+long, a+b" as twin knobs {"merge.short+long": 1.0, ...} (ScenarioError
    when the text is too long)."""
    if not isinstance(text, str) or len(text) > MAX_CAPS_CHARS:
        raise ScenarioError(f"merged partitions must be a text of at most {MAX_CAPS_CHARS} characters")
    groups = ("+".join(n.strip() for n in item.split("+")) for item in text.split(","))
    return {f"{MERGE}.{group}": 1.0 for group in groups if group}
