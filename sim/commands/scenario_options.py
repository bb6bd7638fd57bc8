"""The scenario options shared by `helios whatif` and `helios sweep`, and the ScenarioConfig they describe."""

from __future__ import annotations

import argparse

from sim import placers, policies
from sim.ces.policy import PRESETS
from sim.ces.run import MODES
from sim.estimators import ESTIMATORS
from sim.scenario import CesOptions, ScenarioConfig, ScenarioError, validate
from sim.slurm.knobs import KNOBS

DEFAULTS = ScenarioConfig()  # the flags' defaults


def add_scenario_arguments(p: argparse.ArgumentParser) -> None:
    """Add the options that describe one scenario (dataset, window, policies, predictor, CES) to p."""
    p.add_argument("--dataset", required=True, help="dataset name under $HELIOS_DATA_DIR")
    p.add_argument("--cluster", required=True)
    p.add_argument("--vc", nargs="+", default=[], help="only these VCs (default: all)")
    p.add_argument("--start", help="first submit day YYYY-MM-DD (default: first job)")
    p.add_argument("--end", help="last submit day YYYY-MM-DD, inclusive (default: the last job's day)")
    p.add_argument(
        "--policies",
        default=",".join(DEFAULTS.policies),
        help=f"policies run at every point, comma-separated ({', '.join(policies.POLICIES)}; none: CES only)",
    )
    p.add_argument("--placer", choices=list(placers.PLACERS), default=DEFAULTS.placer)
    p.add_argument("--backfill", action="store_true")
    p.add_argument("--estimator", choices=list(ESTIMATORS), default=DEFAULTS.estimator)
    p.add_argument(
        "--noise-level", type=float, default=DEFAULTS.noise_level, help="noisy-oracle error level (1 = artifact's)"
    )
    p.add_argument("--load-factor", type=float, default=DEFAULTS.load_factor)
    p.add_argument("--capacity-scale", type=float, default=DEFAULTS.capacity_scale)
    p.add_argument("--seed", type=int, default=DEFAULTS.seed)
    p.add_argument("--ces", action="store_true", help="run CES at every point (ces.* grid values imply it)")
    p.add_argument("--ces-preset", choices=sorted(PRESETS), default=DEFAULTS.ces.preset)
    p.add_argument("--ces-mode", choices=MODES, default=DEFAULTS.ces.mode)
    p.add_argument(
        "--ces-schedule", default=DEFAULTS.ces.schedule, help="recorded, or a policy whose schedule CES replays"
    )
    p.add_argument(
        "--twin",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help=(
            "set a knob of the Slurm twin (the captured configuration, or the one calibrated from the record) for the "
            "slurm policy (repeatable): "
            f"{', '.join(KNOBS)}; account_gpus.ACCOUNT (the account's GPUs at once); merge.PART+PART=1 (partitions "
            "sharing their nodes)"
        ),
    )
    p.add_argument(
        "--no-twin-baseline",
        dest="twin_baseline",
        action="store_false",
        help=(
            "do not replay the Slurm twin first: the policies are then compared with the one closest to the record "
            "(default: the twin, captured or calibrated from the record, is the baseline every policy is measured "
            "against, with a band from its own error)"
        ),
    )


def base_config(args: argparse.Namespace) -> ScenarioConfig:
    """The scenario every grid point starts from, built from the command-line options."""
    names = [p.strip() for p in args.policies.split(",") if p.strip()]
    chosen = () if names == ["none"] else tuple(names)
    ces = CesOptions(enabled=args.ces, preset=args.ces_preset, mode=args.ces_mode, schedule=args.ces_schedule)
    config = ScenarioConfig(
        dataset=args.dataset,
        cluster=args.cluster,
        vcs=tuple(args.vc),
        start=args.start,
        end=args.end,
        policies=chosen,
        placer=args.placer,
        backfill=args.backfill,
        estimator=args.estimator,
        noise_level=args.noise_level,
        load_factor=args.load_factor,
        capacity_scale=args.capacity_scale,
        seed=args.seed,
        ces=ces,
        twin=twin_knobs(args.twin),
        twin_baseline=args.twin_baseline,
    )
    if chosen or args.ces:
        validate(config)
    return config


def twin_knobs(items: list[str]) -> tuple[tuple[str, float], ...]:
    """Parse 'knob=value' items into the scenario's twin knobs (ScenarioError on a malformed item)."""
    pairs = []
    for item in items:
        name, sep, value = item.partition("=")
        try:
            knob, dot, argument = name.strip().partition(".")
            pairs.append((knob.replace("-", "_") + dot + argument, float(value)))
        except ValueError:
            sep = ""
        if not sep:
            raise ScenarioError(f"--twin {item!r}: expected KNOB=NUMBER (knobs: {', '.join(KNOBS)})")
    return tuple(sorted(pairs))
