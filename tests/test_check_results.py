"""Tests of tools/check_results.py (the GPU smoke test's judge) on the compare fixture (a cut of
a recorded H200 run: ResNet-50 fp16 graph at batch 1 and 32) against small configs.

    python3 -m unittest tests/test_check_results.py
"""
import copy
import json
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import check_results as chk  # noqa: E402

with open(os.path.join(ROOT, "tests", "data", "compare_fixture_h200.json")) as f:
    DOC = json.load(f)
CONFIG = {"modes": ["graph"],
          "benchmarks": [{"network": "resnet50", "precisions": ["fp16"], "batches": [1, 32]}]}


class CheckResults(unittest.TestCase):
    def test_complete(self):
        self.assertEqual(chk.expected(CONFIG), {("resnet50", "fp16", "graph", 1),
                                                ("resnet50", "fp16", "graph", 32)})
        self.assertEqual(chk.problems(DOC, CONFIG), [])

    def test_missing_failed_truncated_and_context(self):
        cfg = copy.deepcopy(CONFIG)
        cfg["benchmarks"][0]["batches"].append(8)
        self.assertEqual(chk.problems(DOC, cfg), ["resnet50/fp16/graph/batch:8: missing"])
        doc = copy.deepcopy(DOC)
        doc["benchmarks"] = [e for e in doc["benchmarks"] if "batch:32/" not in e["name"]]
        doc["benchmarks"].append({"name": "resnet50/fp16/graph/batch:32/manual_time",
                                  "run_name": "resnet50/fp16/graph/batch:32/manual_time",
                                  "error_occurred": True, "error_message": "out of memory"})
        doc["truncated"] = True
        del doc["context"]["cudnn_version_loaded"]
        found = chk.problems(doc, CONFIG)
        self.assertIn("the JSON was cut off before the run finished", found)
        self.assertIn("context lacks cudnn_version_loaded", found)
        self.assertIn("resnet50/fp16/graph/batch:32: failed: out of memory", found)

    def test_results_lines_of_a_killed_run(self):
        # The same rows as results lines (cnnbench --results_lines), the last one cut off mid
        # write: the finished rows are read, the cut one dropped, the document marked truncated.
        import compare_pytorch as cp
        import tempfile
        lines = [json.dumps({"context": DOC["context"]})]
        lines += [json.dumps(e) for e in DOC["benchmarks"]]
        text = "\n".join(lines) + "\n" + lines[-1][: len(lines[-1]) // 2]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            with open(path, "w") as f:
                f.write(text)
            doc = cp.read_benchmark_json(path)
        self.assertTrue(doc["truncated"])
        self.assertEqual(len(doc["benchmarks"]), len(DOC["benchmarks"]))
        self.assertEqual(doc["context"]["gpu_name"], "NVIDIA H200")
        self.assertEqual(chk.problems(doc, CONFIG), ["the JSON was cut off before the run finished"])
        with self.assertRaisesRegex(ValueError, "line 2: not JSON"):
            cp.read_results_lines(lines[0] + "\n{bad\n" + lines[1] + "\n")

    def test_the_smoke_config_asks_for_every_network(self):
        import yaml
        with open(os.path.join(ROOT, "configs", "smoke.yaml")) as f:
            cfg = yaml.safe_load(f)
        nets = {k[0] for k in chk.expected(cfg)}
        self.assertEqual(len(nets), 18)
        self.assertEqual(len(chk.expected(cfg)), 36)


if __name__ == "__main__":
    unittest.main()
