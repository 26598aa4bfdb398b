"""Tests of tools/layer_gaps.py: layer costs from the layer table's shape strings, a shared shape's
time at every use, untimed ops with their bounds, the model's share outside its timed layers, and
bad inputs.

Run from the repository root:  python3 -m unittest -v tests/test_layer_gaps.py
"""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import layer_gaps as lg  # noqa: E402


def layer(name, op, shape, tuned_us):
    return {"name": name, "op": op, "shape": shape, "tuned_us": tuned_us, "engine": "eng1"}


class Costs(unittest.TestCase):
    def test_conv_linear_pool_and_groups(self):
        flops, nbytes = lg.layer_cost(layer("c", "conv+bias+relu",
                                            "in 2x3x8x8 -> out 2x4x4x4 k3 s2", 1))
        self.assertEqual(flops, 2.0 * 2 * 4 * 4 * 4 * 3 * 3 * 3)
        self.assertEqual(nbytes, 2 * (2 * 3 * 64 + 2 * 4 * 16 + 4 * 3 * 9))
        # A residual add reads a tensor like y more; a depthwise conv's MACs are per group.
        _, with_add = lg.layer_cost(layer("c", "conv+bias+add+relu",
                                          "in 2x3x8x8 -> out 2x4x4x4 k3 s2", 1))
        self.assertEqual(with_add, nbytes + 2 * 2 * 4 * 16)
        dw, _ = lg.layer_cost(layer("d", "conv+bias", "in 1x8x4x4 -> out 1x8x4x4 k3 s1 g8", 1))
        self.assertEqual(dw, 2.0 * 8 * 16 * 9)
        self.assertEqual(lg.layer_cost(layer("fc", "linear+bias", "in 4x16 -> out 4x10", 1)),
                         (2.0 * 4 * 16 * 10, 2 * (64 + 40 + 160)))
        self.assertEqual(lg.layer_cost(layer("p", "avgpool", "in 1x8x4x4 -> out 1x8x4x4", 0)),
                         (0.0, 2 * 256.0))
        self.assertEqual(lg.layer_cost(layer("s", "squeeze_excite", "1x8x4x4 squeeze 2", 0)),
                         (0.0, 0.0))


class Runs(unittest.TestCase):
    def write(self, d, benchmarks, models):
        run = os.path.join(d, "run.json")
        with open(run, "w") as f:
            json.dump({"benchmarks": benchmarks}, f)
        with open(os.path.join(d, "run.layers.json"), "w") as f:
            json.dump({"models": models}, f)
        return run

    def test_shared_shapes_untimed_ops_and_the_outside_share(self):
        shape = "in 2x8x8x8 -> out 2x8x8x8 k3 s1"
        model = {"model": "net/fp16/batch:2", "layers": [
            layer("a", "conv+bias+relu", shape, 100.0),
            layer("b", "conv+bias+relu", shape, 0.0),  # shares a's plan: a's time
            layer("pool", "maxpool", "in 2x8x8x8 -> out 2x8x4x4", 0.0),
            layer("fc", "linear+bias", "in 2x128 -> out 2x10", 10.0)]}
        train = dict(model, model="net/fp16/batch:2", mode="train")
        benchmarks = [
            {"name": "net/fp16/graph/batch:2/manual_time", "aggregate_name": "median",
             "ms_per_batch": 0.5},
            {"name": "net/fp16/graph/batch:2/manual_time", "ms_per_batch": 0.9}]
        with tempfile.TemporaryDirectory() as d:
            run = self.write(d, benchmarks, [model, train])
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(lg.main([run, "--top", "2", "--out-md",
                                          os.path.join(d, "gaps.md")]), 0)
            text = out.getvalue()
            self.assertTrue(os.path.exists(os.path.join(d, "gaps.md")))
        self.assertIn("Graph 0.500 ms; the autotuned layers' own times 0.210 ms; outside them "
                      "58.0%", text)
        self.assertIn("maxpool x1", text)
        self.assertNotIn("CUDA-graph replays", text)  # no layer had the graph round
        self.assertEqual(text.count("## "), 1)  # the training model is left out
        s = lg.analyse(model, 0.5, 900.0, 4300.0, 10)
        self.assertEqual([w["name"] for w in s["worst"]][:2], ["a", "b"])
        # 2,560 bytes at 4,300 GB/s (4.3e6 bytes a microsecond), in milliseconds.
        self.assertAlmostEqual(s["untimed"]["maxpool"]["bound_ms"],
                               2 * (2 * 8 * 64 + 2 * 8 * 16) / 4.3e6 / 1000.0, places=12)
        # a's time came from the graph round: b shares its plan, so both count as replays.
        model["layers"][0]["tuned_in_graph"] = True
        s = lg.analyse(model, 0.5, 900.0, 4300.0, 10)
        self.assertEqual((s["timed_in_graph"], s["timed_layers"]), (2, 3))
        self.assertIn("2 of the 3 timed layers' times are CUDA-graph replays",
                      lg.markdown([s], 900.0, 4300.0))

    def test_bad_inputs_say_so(self):
        with tempfile.TemporaryDirectory() as d:
            err = io.StringIO()
            with redirect_stderr(err):
                self.assertEqual(lg.main([os.path.join(d, "missing.json")]), 2)
            self.assertIn("cannot read", err.getvalue())
            run = self.write(d, [], [{"model": "net/fp16/batch:2", "layers": []}])
            err = io.StringIO()
            with redirect_stderr(err):
                self.assertEqual(lg.main([run]), 1)
            self.assertIn("no model", err.getvalue())
            with redirect_stderr(io.StringIO()):
                self.assertEqual(lg.main([run, "--tflops", "0"]), 2)
            # Not JSON at all: one line naming the file, no traceback.
            with open(run, "w") as f:
                f.write("not json")
            err = io.StringIO()
            with redirect_stderr(err):
                self.assertEqual(lg.main([run]), 2)
            self.assertIn(f"cannot read {run}", err.getvalue())
            self.assertNotIn("Traceback", err.getvalue())
            # A corrupt layer table is named too.
            self.write(d, [], [])
            with open(os.path.join(d, "run.layers.json"), "w") as f:
                f.write("{")
            err = io.StringIO()
            with redirect_stderr(err):
                self.assertEqual(lg.main([run]), 2)
            self.assertIn("run.layers.json", err.getvalue())

    def test_a_cut_off_run_is_read(self):
        # Google Benchmark leaves the list open when a run is killed: the finished rows count.
        shape = "in 2x8x8x8 -> out 2x8x8x8 k3 s1"
        model = {"model": "net/fp16/batch:2",
                 "layers": [layer("a", "conv+bias+relu", shape, 100.0)]}
        bench = {"name": "net/fp16/graph/batch:2/manual_time", "aggregate_name": "median",
                 "ms_per_batch": 0.5}
        with tempfile.TemporaryDirectory() as d:
            run = self.write(d, [bench, dict(bench, name="other/fp16/graph/batch:2/manual_time")],
                             [model])
            with open(run) as f:
                text = json.dumps(json.load(f), indent=2)
            with open(run, "w") as f:  # cut inside the second entry
                f.write(text[:text.index('"other')])
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(lg.main([run]), 0)
        self.assertIn("Graph 0.500 ms", out.getvalue())


if __name__ == "__main__":
    unittest.main()
