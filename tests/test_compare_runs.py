"""Tests of tools/compare_runs.py (issue 8) on a fixture cut from a recorded H200 run
(tests/data/compare_fixture_h200.cmd) and copies of it changed here: the same run, faster and
slower ones with enough repetitions for the U test and with few, different GPUs refused, a
benchmark missing on one side, the versions that differ, the layers whose engine changed, and
the U test's p-values against values worked out by hand.

    python3 -m unittest tests/test_compare_runs.py
"""
import contextlib
import copy
import io
import json
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import compare_runs as cr  # noqa: E402

FIXTURE = os.path.join(ROOT, "tests", "data", "compare_fixture_h200.json")


def fixture():
    with open(FIXTURE) as f:
        return json.load(f)


def scaled(doc, factor, reps=None):
    """A copy with every repetition's img/s times `factor` (and times a small spread), with
    `reps` repetitions per benchmark when given (copies of the recorded ones)."""
    out = copy.deepcopy(doc)
    its = [e for e in out["benchmarks"] if e.get("run_type") == "iteration"]
    if reps:
        grown = []
        for name in sorted({e["run_name"] for e in its}):
            base = [e for e in its if e["run_name"] == name]
            for i in range(reps):
                e = copy.deepcopy(base[i % len(base)])
                e["img_per_s"] *= 1 + 0.001 * (i % 5)
                grown.append(e)
        its = grown
        out["benchmarks"] = grown
    for e in its:
        e["img_per_s"] *= factor
    return out


def write(d, name, doc):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def run_compare(old_doc, new_doc, *args):
    with tempfile.TemporaryDirectory() as d:
        a, b = write(d, "old.json", old_doc), write(d, "new.json", new_doc)
        res = cr.compare(cr.load(a), cr.load(b), *args)
    return res


class MannWhitney(unittest.TestCase):
    def test_exact_p_values(self):
        # Fully separated samples of 3 and 3: U = 0, P(U <= 0) = 1 / C(6, 3) = 1/20, two-sided
        # 0.1. Of 9 and 9: 2 / C(18, 9) = 2 / 48620.
        self.assertAlmostEqual(cr.mann_whitney_p([1, 2, 3], [4, 5, 6]), 0.1)
        self.assertAlmostEqual(cr.mann_whitney_p(list(range(9)), list(range(10, 19))),
                               2 / 48620)
        # Interleaved: no evidence, whichever side comes first. U = 6 of 16: P(U <= 6) for
        # 4 and 4 is 24 / 70, two-sided 48 / 70.
        self.assertAlmostEqual(cr.mann_whitney_p([1, 3, 5, 7], [2, 4, 6, 8]),
                               cr.mann_whitney_p([2, 4, 6, 8], [1, 3, 5, 7]))
        self.assertAlmostEqual(cr.mann_whitney_p([1, 3, 5, 7], [2, 4, 6, 8]), 48 / 70)
        # Ties take the normal approximation; identical samples give 1.
        self.assertAlmostEqual(cr.mann_whitney_p([5, 5, 5], [5, 5, 5]), 1.0)


class Compare(unittest.TestCase):
    def test_same_run_is_the_same(self):
        res = run_compare(fixture(), fixture())
        self.assertEqual({r["verdict"] for r in res["rows"]}, {"same"})
        self.assertEqual(res["versions"], [])
        self.assertEqual(len(res["rows"]), 2)

    def test_faster_and_slower_by_the_u_test(self):
        doc = fixture()
        old = scaled(doc, 1.0, reps=10)
        res = run_compare(old, scaled(doc, 1.10, reps=10))
        self.assertEqual({r["verdict"] for r in res["rows"]}, {"faster"})
        self.assertTrue(all(r["p"] is not None and r["p"] < 0.05 for r in res["rows"]))
        res = run_compare(old, scaled(doc, 0.90, reps=10))
        self.assertEqual({r["verdict"] for r in res["rows"]}, {"slower"})
        # Within --min-change: the same, however significant.
        res = run_compare(old, scaled(doc, 1.005, reps=10))
        self.assertEqual({r["verdict"] for r in res["rows"]}, {"same"})
        net = res["networks"]["resnet50"]
        self.assertAlmostEqual(net["geomean"], 1.005, places=6)

    def test_few_repetitions_use_the_noise(self):
        doc = fixture()  # five repetitions: no U test
        res = run_compare(doc, scaled(doc, 1.2))
        self.assertEqual({r["verdict"] for r in res["rows"]}, {"faster"})
        self.assertTrue(all(r["p"] is None and r["note"] == "(few reps)" for r in res["rows"]))

    def test_versions_gpus_and_missing(self):
        doc = fixture()
        new = copy.deepcopy(doc)
        new["context"]["cudnn_version_loaded"] = "9.14.0"
        new["benchmarks"] = [e for e in new["benchmarks"] if "batch:1/" not in e["name"]]
        res = run_compare(doc, new)
        self.assertIn(("cudnn_version_loaded", "9.19.0", "9.14.0"), res["versions"])
        self.assertEqual(res["only_old"], ["resnet50/fp16/graph/batch:1/manual_time"])
        text = cr.render(res, "old.json", "new.json")
        self.assertIn("| cudnn_version_loaded | 9.19.0 | 9.14.0 |", text)
        self.assertIn("## Only in the old run", text)
        other = copy.deepcopy(doc)
        other["context"]["gpu_name"] = "NVIDIA H100"
        with self.assertRaisesRegex(cr.InputError, "different GPUs"):
            run_compare(doc, other)
        self.assertEqual(len(run_compare(doc, other, 0.05, True)["rows"]), 2)

    def test_engine_changes_from_the_layer_tables(self):
        old = {"models": [{"model": "m", "layers": [
            {"name": "a", "op": "conv", "engine": "eng1", "tuned_us": 10.0},
            {"name": "b", "op": "conv", "engine": "eng2", "tuned_us": 5.0}]}]}
        new = {"models": [{"model": "m", "layers": [
            {"name": "a", "op": "conv", "engine": "eng1", "tuned_us": 10.5},
            {"name": "b", "op": "conv", "engine": "eng7", "tuned_us": 9.0}]}]}
        self.assertEqual(cr.engine_changes(old, new), [("m", "b (conv)", "eng2", "eng7", 5.0, 9.0)])
        with tempfile.TemporaryDirectory() as d:
            a, b = write(d, "a.json", fixture()), write(d, "b.json", fixture())
            write(d, "a.layers.json", old)
            write(d, "b.layers.json", new)
            res = cr.compare(cr.load(a), cr.load(b))
        self.assertEqual(len(res["engines"]), 1)
        self.assertIn("| m | b (conv) | eng2 | eng7 | 5.0 | 9.0 |", cr.render(res, a, b))

    def test_bad_input_is_one_message(self):
        with tempfile.TemporaryDirectory() as d:
            bad = write(d, "bad.json", {"context": {}})
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(cr.main([bad, FIXTURE]), 2)
            self.assertIn("bad.json", err.getvalue())
            self.assertEqual(err.getvalue().count("\n"), 1)


if __name__ == "__main__":
    unittest.main()
