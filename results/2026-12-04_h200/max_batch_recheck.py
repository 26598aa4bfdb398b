#!/usr/bin/env python3
"""The max-batch searches of calls 25 to 27, re-read after the stale-error defect (call 28).

A failed CUDA call left its error as the runtime's "last error"; the next kernel launch's check
(cudaGetLastError) reported it again as its own. In a search, an attempt that failed at an
allocation could so make the NEXT attempt fail at its first launch check, whatever its memory.
So: a batch that fitted did fit; a failure at an allocation (cudaMalloc) is real; a failure "in
cudaGetLastError()" right after another failed attempt is unknown. Per search this prints the
largest batch that fitted (a lower bound, exact where the first batch above it failed at an
allocation) and the smallest batch that failed at an allocation (the trusted upper bound).

    python3 max_batch_recheck.py call2[567]/m/max_batch_*.jsonl
"""
import json
import sys

rows = {}
for path in sys.argv[1:]:
    limit = None
    prev_failed = False
    for line in open(path):
        j = json.loads(line)
        if "context" in j:
            limit = j["context"].get("memory_limit", "?")
            continue
        a = j.get("max_batch_attempt")
        if not a:
            continue
        key = (a["search"].split("/max_batch")[0], a["search"].split("max_batch")[1], limit)
        r = rows.setdefault(key, {"fits": [], "alloc_fail": [], "unknown": [], "path": path})
        if a["fit"] == "fits":
            r["fits"].append(a["batch"])
            prev_failed = False
        else:
            at_launch = "cudaGetLastError" in a["message"]
            (r["unknown"] if at_launch and prev_failed else r["alloc_fail"]).append(a["batch"])
            prev_failed = True
print("| search | limit | largest that fitted | smallest failing at an allocation | unknown | "
      "the answer |")
print("|---|---|---:|---:|---|---|")
for (name, extra, limit), r in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][2])):
    lo = max(r["fits"]) if r["fits"] else 0
    hi = min(r["alloc_fail"]) if r["alloc_fail"] else None
    unknown = sorted(b for b in r["unknown"] if b > lo and (hi is None or b < hi))
    if hi is not None and hi == lo + 1:
        answer = f"{lo} (exact)"
    elif hi is not None:
        answer = f"{lo} to {hi - 1}"
    else:
        answer = f">= {lo} (no failure seen)"
    print(f"| {name}{extra} | {limit} | {lo} | {hi or '-'} | "
          f"{', '.join(map(str, unknown)) or '-'} | {answer} |")
