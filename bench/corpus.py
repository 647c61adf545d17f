"""Every corpus fusion on nvFuser, as given vs optimized. "As given" is the file's own
definition function run on a real nvFuser FusionDefinition, not eqsat's reading of it; the
optimized fusion's outputs are checked against it (dtype tolerance). Each row records three
timings of each: ``us`` (one call at a time: the latency), ``steady_us`` (calls back to back:
host cost overlapped) and ``device_us`` (the kernels alone, from torch.profiler), with the
kernel count, and the cost model's predictions beside them.

    python bench/corpus.py [--corpus DIR ...] [--frontend F] [--json out.json] [--only NAME ...]   # GPU
    python bench/corpus.py --predict out.json [--profile P] [--host-scale auto|F]
        # CPU: re-predict a recorded run
    python bench/corpus.py --predict RUN.json ... --fit-error PROFILE.json ...   # CPU: fit the error table

By default both corpora run: ../shared/corpus and ../shared/corpus_thunder (EQSAT_CORPUS,
EQSAT_CORPUS_THUNDER). ``--frontend`` lowers the optimized fusion to that frontend (default:
the file's own; as given always runs on the frontend the file imports). The second form
recomputes the cost model's predictions for a recorded run (no GPU needed), so the
segmentation model and a profile can be checked against nvFuser's real kernel counts and times.
A GPU run records the host probe (``eqsat.testing.host_probe``: a one-op fusion's steady-state
time, before and after the corpus) as ``host_probe_us``, and on each row the probe of the call
that measured it, measured again right before the row (``host_probe_start_us``: the call's
first; ``--resume`` continues a run on another machine); ``--host-scale auto``
predicts each row with the profile's host constants scaled to its machine, apart from the
model's own error (nvFuser's host cost differed by 1.7x between two sessions on the same kind
of GPU).

The third form fits each profile's ``error`` table (``eqsat.cost.error_table``: the model's
relative error of the kernels' time by predicted kernel count and kernel time, the margin
``optimize_fusion`` asks a predicted saving to exceed) on the (as given, candidate) pairs of
the recorded runs made with that profile and ``--min-gain 0``, each pair predicted again by
the current model, and writes it into that profile's file. The shipped table is refitted,
after a change to the cost model or a new recorded run, with this one command:

    python bench/corpus.py --predict bench/results/h200_pairs_host_fit_035.json \
        --fit-error eqsat/cost/profiles/h200_host_fit.json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import re
import statistics
import sys
import time
import traceback

import eqsat
from eqsat.testing import host_probe
from eqsat.cost.error_table import fit_error_table, shortfall
from eqsat.cost.profile import Profile, load_profile

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_CORPORA = [
    pathlib.Path(os.environ.get("EQSAT_CORPUS", ROOT.parent / "shared" / "corpus")),
    pathlib.Path(os.environ.get("EQSAT_CORPUS_THUNDER", ROOT.parent / "shared" / "corpus_thunder")),
]
SLOWER = 1.03  # target: no fusion slower than as given by more than 3%


def corpus_paths(corpora: list[pathlib.Path], only) -> list[pathlib.Path]:
    paths = sorted((p for c in corpora if c.is_dir() for p in c.glob("*.py")), key=lambda p: p.stem)
    if only:
        paths = [p for p in paths if p.stem in set(only)]
    return paths


def _measure(fd, inputs, runs, kernels=True):
    """Latency (``us``) and steady-state time; with ``kernels``, the kernels from the profiler."""
    from gpu_timing import profile_kernels, throughput_us, time_us

    # an output aliased to an input is written into it each run: the values drift, the work does not
    t = time_us(lambda: fd.execute(inputs), runs, max_seconds=0.5)
    steady = throughput_us(lambda: fd.execute(inputs), runs, max_seconds=0.5)
    if not kernels:
        return {"us": t, "steady_us": steady}
    kernels = profile_kernels(lambda: fd.execute(inputs), repeats=5)
    nvf = [k for k in kernels if k.is_nvfuser]
    return {
        "us": t,
        "steady_us": steady,
        "device_us": round(sum(k.us for k in kernels), 2),
        "kernels": len(nvf),
        "other_kernels": len(kernels) - len(nvf),
        "kernel_names": [k.name for k in kernels],
        "kernel_us": [round(k.us, 2) for k in kernels],
    }


# each fusion is timed this many times, as given and optimized in turn, and the least of each
# timing kept: nvFuser's host cost drifts within a run (the host probe, a one-op fusion, went
# from 20.2 to 33.9 us at steady state in one H100 run, s35), so one measure of each, one after
# the other, compares two machines (an unchanged fusion re-lowered measured 0.59x)
ROUNDS = 3


def _least(measures) -> dict:
    """One fusion's measures, each timing the least over the rounds (the kernels: the last's)."""
    measures = list(measures)
    out = dict(measures[-1])
    for key in ("us", "steady_us"):
        out[key] = min(m[key] for m in measures)
    out["rounds"] = len(measures)
    return out


def _outputs(fd, inputs):
    """Outputs, then the tensor inputs as the run left them (aliased outputs land there)."""
    from eqsat.reference.devices import fresh_copies

    inputs = fresh_copies(inputs)
    return list(fd.execute(inputs)) + [x for x in inputs if hasattr(x, "shape")]


def run_one(path: pathlib.Path, runs: int, profile, frontend, min_gain=None, relower=False) -> dict:
    import torch

    from eqsat.lowering.nvfuser import as_given
    from eqsat.reference.compare import mismatch, output_rtols
    from eqsat.reference.devices import to_device
    from eqsat.reference.index_inputs import in_range_inputs

    repro = eqsat.from_file(path)
    opt = eqsat.optimize_fusion(
        repro.fusion, repro.inputs, profile=profile, min_gain=min_gain, relower=relower
    )
    rep = opt.report
    row = {
        "name": path.stem,
        "frontend": repro.frontend,
        "changed": rep.changed,
        "profile": profile,
        "min_gain": min_gain,
        "relower": relower,
        "optimizer_ms": round(rep.seconds * 1e3, 1),
        "predicted_before": rep.before.summary(),
        "predicted_after": rep.after.summary(),
        "rules": rep.rules,
    }
    cuda = to_device(in_range_inputs(repro.fusion, repro.inputs), "cuda", repro.fusion)
    given = as_given(repro)
    ours = opt.to_nvfuser(frontend)
    timed = [given, ours] if rep.changed or frontend else [given]
    rounds = [[_measure(fd, cuda, runs, kernels=i == ROUNDS - 1) for fd in timed] for i in range(ROUNDS)]
    row["given"] = _least(r[0] for r in rounds)
    row["optimized"] = _least(r[-1] for r in rounds)
    if not any(n.op in ("uniform", "normal") and n.arg("rng_seed") is None for n in repro.fusion.nodes):
        a, b = _outputs(given, cuda), _outputs(ours, cuda)
        returned = [
            rtol
            for rtol, out in zip(output_rtols(repro.fusion), repro.fusion.outputs, strict=True)
            if out.alias_input is None
        ]  # aliased outputs are not returned
        rtols = returned + [None] * (len(a) - len(returned))
        if len(a) != len(b):
            row["mismatch"] = [f"{len(b)} outputs instead of {len(a)}"]
        else:
            row["mismatch"] = [
                f"output {i}: {m}"
                for i, (x, y, rtol) in enumerate(zip(a, b, rtols, strict=True))
                if (m := mismatch(y, x, rtol=rtol))
            ]
    row["speedup"] = row["given"]["us"] / row["optimized"]["us"]
    row["speedup_steady"] = row["given"]["steady_us"] / row["optimized"]["steady_us"]
    torch.cuda.synchronize()
    return row


def summarize(rows: list[dict]) -> dict:
    ok = [r for r in rows if "error" not in r]
    changed = [r for r in ok if r["changed"]]
    slower = [r["name"] for r in changed if r["optimized"]["us"] > SLOWER * r["given"]["us"]]
    slower_steady = [
        r["name"]
        for r in changed
        if "steady_us" in r["given"] and r["optimized"]["steady_us"] > SLOWER * r["given"]["steady_us"]
    ]
    kc_before = [r for r in ok if r["predicted_before"]["kernels"] == r["given"]["kernels"]]
    kc_after = [r for r in ok if r["predicted_after"]["kernels"] == r["optimized"]["kernels"]]
    time_err = [abs(r["predicted_before"]["time_us"] / r["given"]["us"] - 1) for r in ok]
    steady_err = [
        abs(r["predicted_before"]["time_us"] / r["given"]["steady_us"] - 1)
        for r in ok
        if "steady_us" in r["given"]
    ]
    timed = [r for r in changed if "steady_us" in r["given"]]
    ordered = [
        r
        for r in timed
        if (r["predicted_after"]["time_us"] < r["predicted_before"]["time_us"])
        == (r["optimized"]["steady_us"] < r["given"]["steady_us"])
    ]
    return {
        "fusions": len(rows),
        "errors": [r["name"] for r in rows if "error" in r],
        "changed": len(changed),
        "ordered_as_measured_steady_state": f"{len(ordered)}/{len(timed)}",
        "slower_than_given_by_3pct": slower,
        "slower_than_given_by_3pct_steady_state": slower_steady,
        "mismatches": [r["name"] for r in ok if r.get("mismatch")],
        "kernel_count_match_given": f"{len(kc_before)}/{len(ok)}",
        "kernel_count_match_optimized": f"{len(kc_after)}/{len(ok)}",
        "time_rel_error_given": _quantiles(time_err),
        "time_rel_error_given_steady_state": _quantiles(steady_err),
    }


def _quantiles(errors: list[float]) -> dict:
    """The median and 90th percentile of relative errors (None where there are none)."""
    if not errors:
        return {"median": None, "p90": None}
    ordered = sorted(errors)
    return {
        "median": round(statistics.median(ordered), 3),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
    }


def table(rows: list[dict]) -> str:
    lines = [
        f"{'fusion':44s} {'given us':>9s} {'eqsat us':>9s} {'speedup':>7s} {'steady':>7s} "
        f"{'device':>7s}  kernels (pred/actual)  time pred/actual"
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['name']:44s} error: {r['error'].splitlines()[-1][:80]}")
            continue
        g, o = r["given"], r["optimized"]
        kb = f"{r['predicted_before']['kernels']}/{g['kernels']}"
        ka = f"{r['predicted_after']['kernels']}/{o['kernels']}"
        device = g["device_us"] / o["device_us"] if o.get("device_us") else float("nan")
        lines.append(
            f"{r['name']:44s} {g['us']:9.1f} {o['us']:9.1f} {r['speedup']:7.2f} "
            f"{r.get('speedup_steady', float('nan')):7.2f} {device:7.2f}  "
            f"{kb:>5s} -> {ka:<5s}{'*' if r['changed'] else ' '}          "
            f"{r['predicted_before']['time_us'] / g['us']:5.2f}"
        )
    return "\n".join(lines)


def repredict(
    path: str, corpora: list[pathlib.Path], profile, quiet: bool = False, host_scale: str | None = None
) -> list[dict]:
    """The rows of a recorded run with the predictions recomputed under ``profile`` (rows whose
    file is not in ``corpora`` are left out): as given, and the recorded candidate where the
    model still picks it (else its recorded prediction stays, ``predicted_after_recorded``);
    prints where the kernel count differs unless ``quiet``."""
    with open(path) as f:
        recorded = json.load(f)
    scaled = {}  # the row's host probe (or the scale given) -> the profile scaled to it

    def profile_of(row):
        """The profile, its host constants scaled to the machine ``row`` was measured on."""
        if host_scale is None:
            return profile
        key = host_scale if host_scale != "auto" else _probe_of(recorded, row, path)
        if key not in scaled:
            scaled[key] = load_profile(profile).with_host_scale(
                _host_scale(host_scale, recorded, row, profile, path)
            )
            print(f"predicting with {scaled[key].name}")
        return scaled[key]

    rows = []
    for r in recorded["rows"]:
        if "error" in r:
            rows.append(r)
            continue
        file = _file_of(r["name"], corpora)
        if file is None:
            print(f"{r['name']}: not in {', '.join(map(str, corpora))}; skipped")
            continue
        repro = eqsat.from_file(file, device="meta")
        est = eqsat.estimate_fusion(repro.fusion, repro.inputs, profile=profile_of(r))
        r = dict(r)
        r["predicted_before"] = est.summary()
        if not r["changed"]:
            r["predicted_after"] = r["predicted_before"]
        else:  # the recorded candidate, predicted by this model where it picks it
            pair = _predicted_pair(r, profile_of(r), repro)
            if pair is not None:
                r["predicted_after"] = pair[1]
            else:
                r["predicted_after_recorded"] = True
        rows.append(r)
        if est.summary()["kernels"] != r["given"]["kernels"] and not quiet:
            print(
                f"{r['name']:44s} predicted {len(est.kernels)} kernels, nvFuser ran {r['given']['kernels']}: "
                f"{', '.join(n[:60] for n in r['given']['kernel_names'])}"
            )
    return rows


def _host_scale(given: str, recorded: dict, row: dict, profile, path: str) -> float:
    """``--host-scale``: a number, or ``auto``: the host probe of the machine ``row`` was
    measured on (``_probe_of``) against the profile's prediction of it
    (``eqsat.testing.host_probe``)."""
    if given != "auto":
        return float(given)
    return host_probe.host_scale(_probe_of(recorded, row, path), profile)


def _probe_of(recorded: dict, row: dict, path: str) -> float:
    """The host probe of the machine ``row`` was measured on: its own ``host_probe_us``, else
    the mean of the run's measurements."""
    probe = row.get("host_probe_us")
    if probe is None and recorded.get("host_probe_us"):
        probe = statistics.mean(recorded["host_probe_us"])
    if probe is None:
        raise SystemExit(
            f"{path} recorded no host probe (runs before it was added did not); give --host-scale a number"
        )
    return probe


def fit_error(runs: list[str], profiles: list[str], corpora: list[pathlib.Path]) -> int:
    """The error table of each profile (``eqsat.cost.error_table``) from the (as given,
    candidate) pairs of the recorded ``runs`` that this profile made (runs recorded with
    ``--profile`` naming it and ``--min-gain 0``): the saving each candidate was predicted and
    did not deliver at steady state, bucketed by the input's predicted kernels and time. The
    table is written into the profile's file."""
    rows = []
    for run in runs:
        with open(run) as f:
            rows += [r for r in json.load(f)["rows"] if "error" not in r and r.get("changed")]
    for profile in profiles:
        name = _profile_name(profile)
        samples, other, missing = [], [], []
        for r in rows:
            if _profile_name(r.get("profile")) != name:
                continue
            file = _file_of(r["name"], corpora)
            if file is None:
                missing.append(r["name"])
                continue
            predicted = _predicted_pair(r, profile, eqsat.from_file(file, device="meta"))
            if predicted is None:
                other.append(r["name"])
                continue
            b, a = predicted
            samples.append(
                (
                    b["kernels"],
                    b["time_us"],
                    shortfall(
                        b["time_us"], a["time_us"], r["given"]["steady_us"], r["optimized"]["steady_us"]
                    ),
                )
            )
        if missing:
            print(
                f"{profile}: left out {len(missing)} pairs whose file is in none of "
                f"{', '.join(map(str, corpora))}: "
                f"{', '.join(missing)}",
                file=sys.stderr,
            )
        if other:
            print(
                f"{profile}: left out {len(other)} pairs whose candidate the model no longer picks "
                f"(other rules, or none, at the run's min_gain): {', '.join(other)}",
                file=sys.stderr,
            )
        if not samples:
            print(
                f"{profile}: no recorded pair was made with it (record one with --profile and "
                f"--min-gain 0); its table is left as it is",
                file=sys.stderr,
            )
            continue
        names = ", ".join(pathlib.Path(r).name for r in runs)
        table = fit_error_table(
            samples,
            source=f"bench/corpus.py --fit-error, {time.strftime('%Y-%m-%d')}: "
            f"{len(samples)} (as given, candidate) pairs of {names}",
        )
        with open(profile, encoding="utf-8") as f:
            data = json.load(f)
        data["error"] = table.to_dict()
        Profile.from_dict(data, profile)  # refuse to write a bad one
        text = _compact(json.dumps(data, indent=2, ensure_ascii=False))
        tmp = f"{profile}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, profile)
        print(
            f"{profile}: the saving predicted and not measured, over {len(samples)} pairs\n{table.text()}\n"
        )
    return 0


def _file_of(name: str, corpora: list[pathlib.Path]) -> pathlib.Path | None:
    """The corpus file a recorded row names (the first corpus holding it), or None."""
    return next((c / f"{name}.py" for c in corpora if (c / f"{name}.py").exists()), None)


def _predicted_pair(row: dict, profile, repro) -> tuple[dict, dict] | None:
    """The current model's predictions (as given, candidate) of a recorded pair: its file
    (``repro``) optimized again with ``profile`` at the run's min_gain, or None where it no
    longer picks the recorded candidate (other rules): the measured pair is then of another
    candidate."""
    rep = eqsat.optimize_fusion(
        repro.fusion, repro.inputs, profile=profile, min_gain=row.get("min_gain")
    ).report
    if not rep.changed or sorted(rep.rules) != sorted(row["rules"]):
        return None
    return rep.before.summary(), rep.after.summary()


@functools.lru_cache(maxsize=None)
def _profile_name(profile) -> str:
    """The name of the profile a --profile value (None: the default) or a profile file loads:
    a recorded pair counts for the profile of the same name."""
    return load_profile(profile).name


def _compact(text: str) -> str:
    """JSON with each innermost list of numbers or strings on one line (the table's rows)."""
    return re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--corpus",
        type=pathlib.Path,
        nargs="+",
        default=DEFAULT_CORPORA,
        help="corpus folders (default: ../shared/corpus and ../shared/corpus_thunder)",
    )
    parser.add_argument(
        "--frontend",
        choices=["nvfuser", "nvfuser_direct"],
        help="lower the optimized fusion to this frontend (default: the file's own)",
    )
    parser.add_argument("--json")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--profile", help="cost-model profile (default: the packaged one)")
    parser.add_argument(
        "--min-gain",
        type=float,
        help="optimize_fusion's min_gain (0: keep every candidate predicted cheaper, "
        "to record (as given, candidate) pairs the margin is fitted on)",
    )
    parser.add_argument("--relower", action="store_true", help="optimize_fusion's relower=True")
    parser.add_argument(
        "--predict",
        metavar="RECORDED",
        nargs="+",
        help="re-predict recorded runs on the CPU (several only with --fit-error)",
    )
    parser.add_argument(
        "--host-scale",
        metavar="auto|F",
        help="with --predict: the profile's host constants times F, or (auto) scaled "
        "to the run's own machine by the host probe it recorded",
    )
    parser.add_argument(
        "--fit-error",
        metavar="PROFILE",
        nargs="+",
        help="with --predict: fit each profile's error table on the recorded runs "
        "(predicted with that profile) and write it into the profile's file",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the rows already in --json and run only the fusions it lacks",
    )
    args = parser.parse_args(argv)
    corpora = [c for c in args.corpus if c.is_dir()]
    if not corpora:
        print(
            f"no corpus at {', '.join(map(str, args.corpus))} (set --corpus, EQSAT_CORPUS or "
            "EQSAT_CORPUS_THUNDER)",
            file=sys.stderr,
        )
        return 2
    if args.fit_error:
        if not args.predict or args.profile:
            parser.error(
                "--fit-error needs --predict RUN.json ...; each profile given to it predicts "
                "the runs itself (no --profile)"
            )
        return fit_error(args.predict, args.fit_error, corpora)
    if args.predict:
        if len(args.predict) > 1:
            parser.error("--predict takes one recorded run, several only with --fit-error")
        rows = repredict(args.predict[0], corpora, args.profile, host_scale=args.host_scale)
        print(json.dumps(summarize(rows), indent=1))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("corpus.py runs fusions on a CUDA GPU with nvFuser; none is available here", file=sys.stderr)
        return 2
    rows = []
    if args.resume and args.json and os.path.exists(args.json):
        with open(args.json) as f:
            rows = [r for r in json.load(f)["rows"] if "error" not in r]
    done = {r["name"] for r in rows}
    start = time.time()
    device = torch.cuda.get_device_name(0)
    measure = _probe_measurer()  # the host probe, defined once (None where it cannot be)
    probes = _probe([], measure)  # this machine's host speed, before and after
    for path in corpus_paths(corpora, args.only):
        if path.stem in done:
            continue
        # the host's speed right before this row
        beside = _measure_probe(measure, runs=100) if probes else None
        try:
            rows.append(run_one(path, args.runs, args.profile, args.frontend, args.min_gain, args.relower))
        except Exception as err:
            rows.append({"name": path.stem, "error": "".join(traceback.format_exception(err))[-2000:]})
        r = rows[-1]
        if probes:  # the host speed this row was measured at (a resumed run mixes machines)
            r["host_probe_us"] = beside if beside is not None else probes[0]
            r["host_probe_start_us"] = probes[0]
        msg = (
            r.get("error", "").splitlines()[-1:]
            if "error" in r
            else [
                f"{r['given']['us']:.1f} -> {r['optimized']['us']:.1f} us (steady "
                f"{r['given']['steady_us']:.1f} -> "
                f"{r['optimized']['steady_us']:.1f}, device {r['given']['device_us']:.1f} -> "
                f"{r['optimized']['device_us']:.1f}), kernels {r['given']['kernels']} -> "
                f"{r['optimized']['kernels']} (predicted {r['predicted_before']['kernels']} -> "
                f"{r['predicted_after']['kernels']})"
                + (f" MISMATCH {r['mismatch']}" if r.get("mismatch") else "")
            ]
        )
        print(f"[{time.time() - start:6.1f}s] {path.stem}: {msg[0] if msg else ''}", flush=True)
        torch.cuda.empty_cache()
        if args.json:  # after every fusion: a run cut short keeps what it measured
            _write(args.json, device, rows, probes)
    probes = _probe(probes, measure)
    if args.json:
        _write(args.json, device, rows, probes)
    print("\n" + table(rows) + "\n\n" + json.dumps(summarize(rows), indent=1))
    return 0


def _probe_measurer():
    """The host probe's measurement (``eqsat.testing.host_probe.measurer``), its fusion
    defined once for the run's first probe, the one beside each row and the last; None where
    it cannot be set up (said, and the run goes on without probes)."""
    try:
        return host_probe.measurer()
    except Exception as err:  # the probe is a side measurement: the corpus matters more
        print(f"host probe failed: {type(err).__name__}: {err}", flush=True)
        return None


def _measure_probe(measure, runs: int = 200) -> float | None:
    """One measurement of the host probe in µs (None where there is no probe, or it fails:
    said, and the run goes on)."""
    if measure is None:
        return None
    try:
        return measure(runs)
    except Exception as err:  # a side measurement, as above
        print(f"host probe failed: {type(err).__name__}: {err}", flush=True)
        return None


def _probe(probes: list[float], measure) -> list[float]:
    """``probes`` and one more measurement of the host probe (none where it fails)."""
    us = _measure_probe(measure)
    if us is None:
        return probes
    print(
        f"host probe: {us:.1f} us at steady state (predicted {host_probe.predicted().time_us:.1f})",
        flush=True,
    )
    return [*probes, us]


def _write(path, device, rows, probes):
    rows = sorted(rows, key=lambda r: r["name"])
    with open(path, "w") as f:
        json.dump(
            {"device": device, "host_probe_us": probes, "summary": summarize(rows), "rows": rows}, f, indent=1
        )


if __name__ == "__main__":
    sys.exit(main())
