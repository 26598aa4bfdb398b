#!/usr/bin/env python3
"""ctest's GPU entries (tests/CMakeLists.txt): every GPU test runs in exactly one entry.

Each `gpu_*` entry that runs test_gpu lists its tests (--gtest_list_tests, with the entry's filter
and its shard environment; listing needs no device). The union must be test_gpu's whole list, no
test may run twice (in two shards, or in a suite and in gpu_device_wide), no entry may be empty,
and gpu_device_wide must be RUN_SERIAL. Listing ignores the shard variables, so the shards are
gtest's protocol applied to the list.
Usage: gpu_filters_test.py BUILD_DIR
"""
import json
import os
import subprocess
import sys


def listed(cmd, env):
    out = subprocess.run(cmd + ["--gtest_list_tests"], env=env, capture_output=True, text=True,
                         check=True).stdout
    names, suite = [], ""
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        else:
            names.append(suite + line.split("#")[0].strip())
    return names


def main():
    build = sys.argv[1]
    show = subprocess.run(["ctest", "--test-dir", build, "-L", "gpu", "--show-only=json-v1"],
                          capture_output=True, text=True, check=True).stdout
    tests = json.loads(show)["tests"]
    seen, errors, binary = {}, [], None
    for t in tests:
        cmd = t.get("command") or []
        if not cmd or not os.path.basename(cmd[0]).startswith("test_gpu"):
            continue
        binary = cmd[0]
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        env = dict(os.environ)
        env.pop("GTEST_TOTAL_SHARDS", None)
        env.pop("GTEST_SHARD_INDEX", None)
        for kv in props.get("ENVIRONMENT", []):
            k, _, v = kv.partition("=")
            env[k] = v
        # --gtest_list_tests ignores the shard variables; gtest hands the filtered tests out
        # round-robin in listing order (test k to shard k mod total), so the same here.
        total = int(env.pop("GTEST_TOTAL_SHARDS", "1"))
        index = int(env.pop("GTEST_SHARD_INDEX", "0"))
        names = [n for k, n in enumerate(listed(cmd, env)) if k % total == index]
        if not names:
            errors.append(f"{t['name']}: its filter selects no test")
        for n in names:
            if n in seen:
                errors.append(f"{n}: in {seen[n]} and {t['name']}")
            seen[n] = t["name"]
        if t["name"] == "gpu_device_wide" and not props.get("RUN_SERIAL"):
            errors.append("gpu_device_wide is not RUN_SERIAL")
    if binary is None:
        errors.append("no ctest entry runs test_gpu")
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GTEST_")}
        for n in listed([binary], env):
            if n not in seen:
                errors.append(f"{n}: in no ctest entry")
    for e in errors:
        print("gpu_filters_test:", e)
    print(f"gpu_filters_test: {len(seen)} GPU tests over "
          f"{len(set(seen.values()))} ctest entries, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
