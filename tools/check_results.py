#!/usr/bin/env python3
"""Is a cnnbench results file valid and complete for its config? (the GPU smoke test, issue 8)

    python3 tools/check_results.py RESULTS.json CONFIG.yaml

Checks that the JSON is whole (not cut off), that its context names the device and the
versions, and that every (network, precision, mode, batch) the config asks for has a result
with images/s and no error. Prints one line per problem; exit 0 when there is none, 1 when there
are, 2 for unreadable input.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402

REQUIRED_CONTEXT = ["gpu_name", "driver_version", "cuda_runtime_version", "cudnn_version_loaded",
                    "cublas_version", "cnnbench_version", "cnnbench_git"]


def expected(config):
    """{(network, precision, mode, batch)} the config's benchmarks ask for (train rows included;
    max-batch rows are not throughput rows)."""
    out = set()
    default_modes = config.get("modes") or ["graph"]
    for e in config.get("benchmarks") or []:
        for p in e.get("precisions") or []:
            for b in e.get("batches") or []:
                for m in e.get("modes") or default_modes:
                    out.add((e["network"], p, m, int(b)))
    return out


def problems(doc, config):
    out = []
    if doc.get("truncated"):
        out.append("the JSON was cut off before the run finished")
    ctx = doc.get("context") or {}
    out += [f"context lacks {k}" for k in REQUIRED_CONTEXT if not ctx.get(k)]
    got, errors = {}, {}
    for e in doc.get("benchmarks") or []:
        key = cp.parse_name(e.get("run_name") or e.get("name", ""))
        if key is None:
            continue
        if e.get("error_occurred"):
            errors[key] = str(e.get("error_message") or "error")
        elif cp.entry_img_s(e):
            got[key] = cp.entry_img_s(e)
    for key in sorted(expected(config)):
        name = "/".join(map(str, key[:3])) + f"/batch:{key[3]}"
        if key in errors:
            out.append(f"{name}: failed: {errors[key][:200]}")
        elif key not in got:
            out.append(f"{name}: missing")
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: check_results.py RESULTS.json CONFIG.yaml", file=sys.stderr)
        return 2
    try:
        import yaml
        doc = cp.read_benchmark_json(argv[0])
        with open(argv[1]) as f:
            config = yaml.safe_load(f) or {}
    except (OSError, ValueError, ImportError) as e:
        print(f"check_results: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # yaml.YAMLError, whose module may be missing above
        print(f"check_results: {argv[1]}: {e}", file=sys.stderr)
        return 2
    found = problems(doc, config)
    for p in found:
        print(f"check_results: {p}")
    n = len(expected(config))
    print(f"check_results: {n - sum(1 for p in found if p.endswith(': missing') or ': failed: ' in p)}"
          f" of {n} benchmarks present and successful; {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
