#!/usr/bin/env python3
"""Did this driver or cuDNN upgrade make my networks faster or slower? (issue 8)

    python3 tools/compare_runs.py OLD.json NEW.json [--allow-different-gpus] [--out-md FILE]

Two cnnbench runs (Google Benchmark JSON, several repetitions each) of the same benchmarks:
  - the versions that differ between the two contexts, first (driver, CUDA, cuDNN, cuBLAS, the
    GPU, the suite's revision, ...);
  - per benchmark: old and new median images/s, their ratio, each side's noise ((max - min) /
    median over the repetitions) and a verdict, faster / slower / same, from a two-sided
    Mann-Whitney U test over the repetitions at --alpha (0.05), as Google Benchmark's compare.py
    does it. With fewer than 9 repetitions on a side the test has too little power: then the
    verdict needs the medians to differ by more than both sides' noise, and says "(few reps)".
    A change under --min-change (1%) is "same" whatever the test says;
  - per network: the geometric mean of its ratios and the verdicts counted;
  - per layer, from the .layers.json beside each file: where the engine changed, the usual cause
    of a regression;
  - benchmarks only one side has.
Runs on different GPUs are refused unless --allow-different-gpus. Exit 0, or 2 for bad input.
"""
import argparse
import json
import math
import os
import statistics
import sys
from functools import lru_cache

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402  (the Google Benchmark JSON reader)

MIN_REPS_FOR_U = 9
MAX_ENGINE_ROWS = 40
# Context keys that say which software and hardware produced a run (the rest is noise such as
# load averages); printed where they differ.
VERSION_KEYS = ["gpu_name", "gpu_uuid", "gpu_sm_count", "gpu_memory_mib", "gpu_sm_clock_mhz",
                "gpu_mem_clock_mhz", "gpu_app_sm_clock_mhz", "gpu_app_mem_clock_mhz",
                "gpu_max_sm_clock_mhz", "gpu_power_limit_w", "gpu_ecc", "driver_release",
                "driver_version",
                "cuda_runtime_version", "cudnn_version_loaded", "cudnn_version_compiled",
                "cudnn_library_path", "cublas_version", "cublas_version_compiled",
                "cublas_library_path", "cnnbench_version", "cnnbench_git", "cnnbench_switches",
                "host_name",
                "engine_choice", "exclude_engines", "graph_edges", "share_plans", "config", "date"]


class InputError(Exception):
    """An input that cannot be used; main() reports it and exits 2."""


def load(path):
    """(context, {benchmark: [img/s per repetition]}, {benchmark: error}, layers or None)."""
    try:
        doc = cp.read_benchmark_json(path)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read {path}: {e}") from e
    if "benchmarks" not in doc:
        raise InputError(f"{path}: not Google Benchmark JSON (no 'benchmarks')")
    reps, errors = {}, {}
    for e in doc["benchmarks"]:
        name = e.get("run_name") or e.get("name", "")
        if e.get("error_occurred"):
            errors[name] = str(e.get("error_message") or "error")
        elif e.get("run_type", "iteration") == "iteration":
            v = cp.entry_img_s(e)
            if v is not None:
                reps.setdefault(name, []).append(v)
    layers_path = path[:-5] + ".layers.json" if path.endswith(".json") else None
    layers = None
    if layers_path and os.path.exists(layers_path):
        try:
            with open(layers_path) as f:
                layers = json.load(f)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read {layers_path}: {e}") from e
    context = dict(doc.get("context") or {})
    if doc.get("truncated"):
        context["truncated"] = True
    return context, reps, errors, layers


# --------------------------------------------------------------------------------------------
# Mann-Whitney U
# --------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _count(n, m, u):
    """Orderings of n x's and m y's with exactly u (x, y) pairs where the x comes later."""
    if u < 0 or u > n * m:
        return 0
    if n == 0 or m == 0:
        return 1 if u == 0 else 0
    return _count(n - 1, m, u - m) + _count(n, m - 1, u)


def mann_whitney_p(a, b):
    """Two-sided p-value of the Mann-Whitney U test of samples a and b: exact without ties for
    up to 30 on each side, else the normal approximation with the tie correction."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return 1.0
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks, i = [0.0] * len(pooled), 0
    ties = []
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        ties.append(j - i + 1)
        i = j + 1
    r_a = sum(r for r, (_, side) in zip(ranks, pooled) if side == 0)
    u_a = r_a - n * (n + 1) / 2
    if all(t == 1 for t in ties) and n <= 30 and m <= 30:
        u = int(round(min(u_a, n * m - u_a)))
        total = math.comb(n + m, n)
        tail = sum(_count(n, m, k) for k in range(u + 1)) / total
        return min(1.0, 2 * tail)
    mu = n * m / 2
    nt = n + m
    var = n * m / 12 * ((nt + 1) - sum(t ** 3 - t for t in ties) / (nt * (nt - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u_a - mu) - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(max(z, 0) / math.sqrt(2)))


# --------------------------------------------------------------------------------------------
# The comparison
# --------------------------------------------------------------------------------------------
def noise(values):
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med else 0.0


def verdict(old, new, alpha=0.05, min_change=0.01):
    """(verdict, p or None, note) for two samples of images/s. A change of the medians below
    min_change is "same" however significant: repetitions within one process miss the variation
    between processes (clocks, placement), so a 0.3% shift with 0.1% noise is not a regression."""
    r = statistics.median(new) / statistics.median(old)
    few = min(len(old), len(new)) < MIN_REPS_FOR_U
    p = None if few else mann_whitney_p(old, new)
    note = "(few reps)" if few else ""
    if abs(r - 1) < min_change:
        return "same", p, note
    if few:
        if abs(r - 1) > max(noise(old), noise(new)):
            return ("faster" if r > 1 else "slower"), None, note
        return "same", None, note
    if p < alpha:
        return ("faster" if r > 1 else "slower"), p, ""
    return "same", p, ""


def network_of(name):
    return name.split("/")[0]


def engine_changes(old_layers, new_layers):
    """[(model, layer, old engine, new engine, old us, new us)] for the layers both tables hold
    whose engine differs, the largest change of the tuned time first (us: autotune's time of
    the winner, None under heuristics)."""
    if not old_layers or not new_layers:
        return []
    olds = {m.get("model"): {l["name"] + "|" + l.get("op", ""): l for l in m.get("layers", [])}
            for m in old_layers.get("models", [])}
    out = []
    for m in new_layers.get("models", []):
        before = olds.get(m.get("model"))
        if before is None:
            continue
        for l in m.get("layers", []):
            b = before.get(l["name"] + "|" + l.get("op", ""))
            if b is not None and b.get("engine", "") != l.get("engine", ""):
                out.append((m["model"], l["name"] + " (" + l.get("op", "") + ")",
                            b.get("engine", ""), l.get("engine", ""), b.get("tuned_us") or None,
                            l.get("tuned_us") or None))

    def delta(c):
        return abs(c[5] - c[4]) if c[4] and c[5] else 0.0

    return sorted(out, key=lambda c: -delta(c))


def compare(old, new, alpha=0.05, allow_different_gpus=False, min_change=0.01):
    (c_old, r_old, e_old, l_old), (c_new, r_new, e_new, l_new) = old, new
    if c_old.get("gpu_name") != c_new.get("gpu_name") and not allow_different_gpus:
        raise InputError(f"the runs are on different GPUs ({c_old.get('gpu_name')} and "
                         f"{c_new.get('gpu_name')}): pass --allow-different-gpus to compare them")
    versions = [(k, c_old.get(k), c_new.get(k)) for k in VERSION_KEYS
                if c_old.get(k) != c_new.get(k) and (k in c_old or k in c_new)]
    rows, only_old, only_new, failed = [], [], [], []
    for name in sorted(set(r_old) | set(r_new) | set(e_old) | set(e_new)):
        if name in e_old or name in e_new:
            failed.append((name, e_old.get(name), e_new.get(name)))
            continue
        if name not in r_new:
            only_old.append(name)
            continue
        if name not in r_old:
            only_new.append(name)
            continue
        a, b = r_old[name], r_new[name]
        v, p, note = verdict(a, b, alpha, min_change)
        rows.append({"name": name, "old": statistics.median(a), "new": statistics.median(b),
                     "ratio": statistics.median(b) / statistics.median(a), "noise_old": noise(a),
                     "noise_new": noise(b), "n_old": len(a), "n_new": len(b), "verdict": v,
                     "p": p, "note": note})
    networks = {}
    for r in rows:
        g = networks.setdefault(network_of(r["name"]), {"ratios": [], "faster": 0, "slower": 0,
                                                        "same": 0})
        g["ratios"].append(r["ratio"])
        g[r["verdict"]] += 1
    for g in networks.values():
        g["geomean"] = math.exp(sum(math.log(x) for x in g["ratios"]) / len(g["ratios"]))
    return {"versions": versions, "rows": rows, "networks": networks, "only_old": only_old,
            "only_new": only_new, "failed": failed, "engines": engine_changes(l_old, l_new),
            "alpha": alpha, "min_change": min_change}


def render(res, old_path, new_path):
    out = ["# cnnbench: two runs compared", "", f"old: `{old_path}`  ", f"new: `{new_path}`", ""]
    if res["versions"]:
        out += ["What differs between the runs:", "", "| | old | new |", "|---|---|---|"]
        out += [f"| {k} | {a} | {b} |" for k, a, b in res["versions"]]
    else:
        out.append("The two contexts name the same versions.")
    out += ["", f"## Benchmarks (images/s; verdict: Mann-Whitney U at alpha {res['alpha']} over "
            f"the repetitions, or with fewer than {MIN_REPS_FOR_U}, a difference beyond both "
            f"sides' noise; changes under {100 * res['min_change']:g}% are the same)", "", "| benchmark | old | new | new/old | noise old | noise new | "
            "p | verdict |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in res["rows"]:
        p = "–" if r["p"] is None else f"{r['p']:.3f}"
        out.append(f"| {r['name']} | {r['old']:,.1f} | {r['new']:,.1f} | {r['ratio']:.3f} | "
                   f"{100 * r['noise_old']:.1f}% | {100 * r['noise_new']:.1f}% | {p} | "
                   f"{(r['verdict'] + ' ' + r['note']).strip()} |")
    out += ["", "## Per network", ""]
    for net, g in sorted(res["networks"].items()):
        out.append(f"- {net}: new/old {g['geomean']:.3f} (geometric mean of "
                   f"{len(g['ratios'])}); {g['faster']} faster, {g['slower']} slower, "
                   f"{g['same']} same")
    if res["engines"]:
        shown = res["engines"][:MAX_ENGINE_ROWS]
        out += ["", f"## Layers whose engine changed ({len(res['engines'])}; the "
                f"{len(shown)} whose tuned time moved most)", "",
                "| model | layer | old | new | old us | new us |", "|---|---|---|---|---:|---:|"]
        for m, l, a, b, ua, ub in shown:
            out.append(f"| {m} | {l} | {a} | {b} | {'–' if ua is None else f'{ua:.1f}'} | "
                       f"{'–' if ub is None else f'{ub:.1f}'} |")
    for title, names in (("Only in the old run", res["only_old"]),
                         ("Only in the new run", res["only_new"])):
        if names:
            out += ["", f"## {title}", ""] + [f"- {n}" for n in names]
    if res["failed"]:
        out += ["", "## Failed on a side", ""]
        out += [f"- {n}: old {a or 'ok'}; new {b or 'ok'}" for n, a, b in res["failed"]]
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--allow-different-gpus", action="store_true")
    ap.add_argument("--min-change", type=float, default=0.01,
                    help="relative change of the medians below which a benchmark is the same")
    ap.add_argument("--out-md", help="also write the comparison here")
    args = ap.parse_args(argv)
    try:
        if not 0 < args.alpha < 1:
            raise InputError("--alpha must be between 0 and 1")
        if not 0 <= args.min_change < 1:
            raise InputError("--min-change must be in [0, 1)")
        res = compare(load(args.old), load(args.new), args.alpha, args.allow_different_gpus,
                      args.min_change)
    except InputError as e:
        print(f"compare_runs: {e}", file=sys.stderr)
        return 2
    text = render(res, args.old, args.new)
    print(text, end="")
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
