"""tools/compare_breakdowns.py: breakdown JSONs side by side (stdlib only)."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import compare_breakdowns as cb  # noqa: E402


def breakdown(step_us, kinds, layers=(), network="resnet50", precision="fp16", batch=256, env=None):
    return {"network": network, "precision": precision, "batch": batch, "engine": "heuristic",
            "relu_masks": True, "bn_mask_from_input": True, "pad_channels": True,
            "cnnbench_env": env or {}, "step_us": step_us, "launches_sum_us": step_us * 0.99,
            "by_kind": {k: {"launches": 1, "us": us} for k, us in kinds.items()},
            "roofline": {"layers": [{"name": n, "op": op, "us": us, "bytes": b}
                                    for n, op, us, b in layers]}}


class CompareBreakdownsTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, rel, obj):
        path = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        return path

    def run_tool(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cb.main(list(argv))
        return rc, out.getvalue(), err.getvalue()

    def test_kinds_by_the_baselines_time_with_changes_and_the_step(self):
        a = self.write("call81/b/r50.json", breakdown(
            46824.5, {"backward batchnorm+relu": 6582.7, "forward conv": 6503.8,
                      "backward batchnorm+add+relu": 9863.9}))
        second = breakdown(
            42159.8, {"backward batchnorm+relu": 5037.7, "forward conv": 6573.8,
                      "backward batchnorm+add+relu": 6404.8, "new kind": 10.0},
            env={"CNNBENCH_BN_BWD_FREE_REGS": "1"})
        second["phases_s"] = {"build": 81.25, "step_graph": 1.5, "each_launch": 6.04,
                              "ceilings": 2.0}
        b = self.write("call87/b/r50.json", second)
        md = os.path.join(self.dir, "out.md")
        rc, out, _ = self.run_tool(a, b, "--out-md", md)
        self.assertEqual(rc, 0)
        rows = [l for l in out.splitlines() if l.startswith("| ") and "---" not in l]
        self.assertEqual(rows[0], "| launch kind | call81/b/r50 us | call87/b/r50 us | "
                                  "call87/b/r50 − call81/b/r50 |")
        # The baseline's largest first; a kind only the second file has comes after.
        self.assertTrue(rows[1].startswith("| backward batchnorm+add+relu | 9,863.9 | 6,404.8 | "
                                           "-3,459.1 (-35.1%) |"), rows[1])
        self.assertTrue(rows[4].startswith("| new kind | – | 10.0 | – |"), rows[4])
        self.assertIn("| **step (graph)** | **46,824.5** | **42,159.8** | -4,664.7 (-10.0%) |",
                      out)
        self.assertIn("step 42,159.8 us (6,072 img/s)", out)
        self.assertIn("switches: CNNBENCH_BN_BWD_FREE_REGS=1", out)
        self.assertIn("switches: none", out)
        # The run's own phases where the file has them (the baseline has none).
        self.assertIn("(6,072 img/s); the run build 81.2 s, step graph 1.5 s, each launch 6.0 s, "
                      "ceilings 2.0 s", out)
        self.assertEqual(out.count("; the run "), 1)
        with open(md) as f:
            self.assertEqual(f.read(), out)

    def test_by_stage_sums_time_and_bytes_per_op_and_stage(self):
        layers = [("backward batchnorm+relu layer3.0.bn2", "bwd batchnorm+relu", 100.0, 128.5e6),
                  ("backward batchnorm+relu layer3.1.bn2", "bwd batchnorm+relu", 100.0, 128.5e6),
                  ("backward batchnorm+relu bn1", "bwd batchnorm+relu", 1000.0, 2055.2e6),
                  ("backward maxpool", "bwd maxpool", 1224.5, 924.8e6)]
        a = self.write("a.json", breakdown(100.0, {"x": 1.0}, layers))
        b = self.write("b.json", breakdown(90.0, {"x": 1.0}, layers[:2]))
        rc, out, _ = self.run_tool(a, b, "--by-stage")
        self.assertEqual(rc, 0)
        self.assertIn("| bwd batchnorm+relu | layer3 | 200.0 | 1,285 | 200.0 | 1,285 |", out)
        self.assertIn("| bwd batchnorm+relu | bn1 | 1,000.0 | 2,055 | – | – |", out)
        self.assertIn("| bwd maxpool | other | 1,224.5 | 755 | – | – |", out)

    def test_mismatched_runs_are_refused_unless_allowed(self):
        a = self.write("a.json", breakdown(100.0, {"x": 1.0}))
        b = self.write("b.json", breakdown(100.0, {"x": 1.0}, network="efficientnet_b0"))
        rc, out, err = self.run_tool(a, b)
        self.assertEqual(rc, 2)
        self.assertEqual(out, "")
        self.assertIn("b.json is network efficientnet_b0", err)
        self.assertIn("--allow-mismatch", err)
        rc, _, _ = self.run_tool(a, b, "--allow-mismatch")
        self.assertEqual(rc, 0)

    def test_unreadable_or_foreign_input_is_one_line_and_exit_2(self):
        a = self.write("a.json", breakdown(100.0, {"x": 1.0}))
        bad = self.write("bad.json", "{not json")
        other = self.write("gb.json", {"benchmarks": []})
        for path, says in ((bad, "not a readable breakdown JSON"), (other, "no 'network'"),
                           (os.path.join(self.dir, "missing.json"), "not a readable")):
            rc, out, err = self.run_tool(a, path)
            self.assertEqual(rc, 2, path)
            self.assertIn(says, err)
            self.assertEqual(len(err.strip().splitlines()), 1)
        rc, _, err = self.run_tool(a)
        self.assertEqual(rc, 2)
        self.assertIn("at least two", err)

    def test_labels_are_the_shortest_distinct_tails(self):
        self.assertEqual(cb.short_labels(["x/call81/b/r50.json", "x/call87/b/r50.json"]),
                         ["call81/b/r50", "call87/b/r50"])
        self.assertEqual(cb.short_labels(["b/r50.json", "b/r50_free_regs.json"]),
                         ["r50", "r50_free_regs"])
        self.assertEqual(cb.short_labels(["r50.json", "r50.json"]), ["r50#1", "r50#2"])
        self.assertEqual(cb.stage_of("forward conv conv1"), "conv1")
        self.assertEqual(cb.stage_of("backward batchnorm+add+relu layer4.2.bn3"), "layer4")
        self.assertEqual(cb.stage_of("optimizer"), "other")


if __name__ == "__main__":
    unittest.main()
