#!/usr/bin/env python3
"""Judges a soak run (issue 10): `cnnbench --soak=N` ran the whole sweep N times in one process.

    python3 tools/check_soak.py RUN.json [--out-md SOAK.md] [--rss-growth-mib 64]
                                         [--device-drift-mib 1] [--noise 3]

RUN.json is the run's --benchmark_out (or its .jsonl results lines). It holds each benchmark once a
pass (names ending /pass:K) and a row soak/pass:K after each pass, recorded with every model freed:
the device's used memory (device_used_mib), the process's resident memory (host_rss_mib) and the
pass's wall seconds (pass_s; runs before 2026-12-05 evening lack it, and the table shows "–").

Checks, each printed as a line, exit 1 if any fails (2 for unreadable input):
- memory: after every pass the device's used memory is within --device-drift-mib of the first
  pass's (the first pass loads the libraries' kernels lazily, so it is the baseline);
- host: the resident memory after the last pass is within --rss-growth-mib of the first pass's;
- throughput: for every benchmark, each pass's median images/s is within noise of the first
  pass's: |ratio - 1| <= --noise x the larger coefficient of variation of the two passes'
  repetitions + 1% (one repetition: 2%);
- every pass ran every benchmark without error.
"""
import argparse
import re
import statistics
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402

PASS = re.compile(r"^(?P<base>.+)/pass:(?P<k>\d+)$")


def load(path):
    """(context, {pass: checkpoint counters}, {base name: {pass: [img_s...] or error str}})."""
    doc = cp.read_benchmark_json(path)
    checkpoints, runs = {}, {}
    for e in doc.get("benchmarks", []):
        name = e.get("run_name") or e.get("name", "")
        name = re.sub(r"/(manual_time|iterations:\d+|repeats:\d+)", "", name)
        m = PASS.match(name)
        if not m:
            continue
        base, k = m.group("base"), int(m.group("k"))
        if base == "soak":
            if not e.get("error_occurred"):
                checkpoints[k] = {c: e.get(c) for c in ("device_used_mib", "host_rss_mib", "pass_s")}
            continue
        slot = runs.setdefault(base, {})
        if e.get("error_occurred"):
            slot[k] = str(e.get("error_message") or "error")
            continue
        if e.get("run_type", "iteration") != "iteration" or isinstance(slot.get(k), str):
            continue
        v = cp.entry_img_s(e)
        if v is not None:
            slot.setdefault(k, []).append(v)
    return dict(doc.get("context", {})), checkpoints, runs


def cv(values):
    if len(values) < 2:
        return None
    mean = statistics.mean(values)
    return statistics.stdev(values) / mean if mean else None


def judge(checkpoints, runs, rss_growth_mib=64.0, device_drift_mib=1.0, noise=3.0):
    """[(ok, line)] for every check."""
    out = []
    passes = sorted(checkpoints)
    if not passes:
        return [(False, "no soak/pass:K rows: was the run made with --soak=N?")]
    first = checkpoints[passes[0]]
    for k in passes[1:]:
        c = checkpoints[k]
        d = c["device_used_mib"] - first["device_used_mib"]
        out.append((abs(d) <= device_drift_mib,
                    f"device memory after pass {k}: {c['device_used_mib']:.1f} MiB, "
                    f"{d:+.1f} MiB from pass {passes[0]}"))
    last = checkpoints[passes[-1]]
    g = last["host_rss_mib"] - first["host_rss_mib"]
    out.append((g <= rss_growth_mib,
                f"host resident memory: {first['host_rss_mib']:.1f} MiB after pass {passes[0]}, "
                f"{last['host_rss_mib']:.1f} MiB after pass {passes[-1]} ({g:+.1f} MiB)"))
    for base in sorted(runs):
        slot = runs[base]
        missing = [k for k in passes if k not in slot]
        errors = [(k, v) for k, v in slot.items() if isinstance(v, str)]
        if missing or errors:
            what = ", ".join([f"pass {k} missing" for k in missing] +
                             [f"pass {k}: {v}" for k, v in errors])
            out.append((False, f"{base}: {what}"))
            continue
        ref = slot[passes[0]]
        ref_med = statistics.median(ref)
        for k in passes[1:]:
            vals = slot[k]
            med = statistics.median(vals)
            spreads = [s for s in (cv(ref), cv(vals)) if s is not None]
            allowed = noise * max(spreads) + 0.01 if spreads else 0.02
            ratio = med / ref_med if ref_med else float("inf")
            out.append((abs(ratio - 1) <= allowed,
                        f"{base}: pass {k} {med:,.0f} img/s, {ratio:.3f}x pass {passes[0]} "
                        f"(allowed +/-{allowed:.1%})"))
    return out


def render_markdown(context, checkpoints, runs, verdicts):
    lines = ["# Soak run", ""]
    lines.append(f"- {', '.join(f'{k}={context[k]}' for k in ('gpu_name', 'date', 'cnnbench_git') if k in context)}")
    lines += ["", "| pass | device used MiB | host resident MiB | wall s |", "|---:|---:|---:|---:|"]
    for k in sorted(checkpoints):
        c = checkpoints[k]
        # pass_s: runs before 2026-12-05 evening lack it.
        wall = "–" if c.get("pass_s") is None else f"{c['pass_s']:.1f}"
        lines.append(f"| {k} | {c['device_used_mib']:.1f} | {c['host_rss_mib']:.1f} | {wall} |")
    passes = sorted(checkpoints)
    lines += ["", "| benchmark | " + " | ".join(f"pass {k} img/s" for k in passes) + " |",
              "|---|" + "---:|" * len(passes)]
    for base in sorted(runs):
        cells = []
        for k in passes:
            v = runs[base].get(k)
            cells.append("–" if v is None else ("error" if isinstance(v, str)
                                                 else f"{statistics.median(v):,.0f}"))
        lines.append(f"| {base} | " + " | ".join(cells) + " |")
    failed = [line for ok, line in verdicts if not ok]
    lines += ["", f"{len(verdicts) - len(failed)} of {len(verdicts)} checks pass."]
    lines += [f"- FAIL: {line}" for line in failed]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--out-md")
    ap.add_argument("--rss-growth-mib", type=float, default=64.0)
    ap.add_argument("--device-drift-mib", type=float, default=1.0)
    ap.add_argument("--noise", type=float, default=3.0)
    a = ap.parse_args(argv)
    try:
        context, checkpoints, runs = load(a.run)
    except (OSError, ValueError) as e:
        print(f"check_soak: cannot read {a.run}: {e}", file=sys.stderr)
        return 2
    verdicts = judge(checkpoints, runs, a.rss_growth_mib, a.device_drift_mib, a.noise)
    for ok, line in verdicts:
        print(("ok    " if ok else "FAIL  ") + line)
    if a.out_md:
        with open(a.out_md, "w") as f:
            f.write(render_markdown(context, checkpoints, runs, verdicts))
    return 0 if all(ok for ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
