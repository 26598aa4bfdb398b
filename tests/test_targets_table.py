"""tools/targets_table.py on small hand-made runs: met, missed, no peer, not run, a cut-off file."""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import targets_table as tt  # noqa: E402


def bench(net, mode, batch, ms_reps, error=None):
    """Google Benchmark entries of one cnnbench benchmark: its repetitions and their median."""
    name = f"{net}/fp16/{mode}/batch:{batch}/manual_time"
    if error:
        return [{"name": name, "run_name": name, "run_type": "iteration", "error_occurred": True,
                 "error_message": error}]
    out = [{"name": name, "run_name": name, "run_type": "iteration", "real_time": ms,
            "time_unit": "ms", "batch": batch} for ms in ms_reps]
    med = sorted(ms_reps)[len(ms_reps) // 2]
    out.append({"name": name + "_median", "run_name": name, "run_type": "aggregate",
                "aggregate_name": "median", "real_time": med, "time_unit": "ms", "batch": batch})
    return out


class Targets(unittest.TestCase):
    def files(self, d, benchmarks, pt_rows, ptt_rows):
        paths = [os.path.join(d, n) for n in ("ours.json", "pt.json", "ptt.json")]
        with open(paths[0], "w") as f:
            json.dump({"context": {"gpu_name": "NVIDIA H200", "cudnn_version_loaded": "9.19.0"},
                       "benchmarks": benchmarks}, f)
        with open(paths[1], "w") as f:
            json.dump({"gpu": "NVIDIA H200", "rows": pt_rows}, f)
        with open(paths[2], "w") as f:
            json.dump({"gpu": "NVIDIA H200", "rows": ptt_rows}, f)
        return paths

    def test_verdicts(self):
        benchmarks = (bench("resnet50", "graph", 1, [0.30, 0.31, 0.32])      # 3,226: met
                      + bench("resnet50", "graph", 32, [1.6, 1.5, 1.55])     # 20,645: missed
                      + bench("resnet50", "graph", 256, [7.7, 7.72, 7.8])    # 33,161: no peer
                      + bench("vgg16", "graph", 256, [20.0], error="out of memory")
                      + bench("resnet50", "train", 256, [30.0, 30.5, 31.0])  # 8,393
                      + bench("efficientnet_b0", "train", 256, [30.0]))       # 8,533, peer ahead
        pt = [{"model": "resnet50", "mode": "fp16cl_graph", "batch": 1, "ms": 0.9, "img_s": 1111.0},
              {"model": "resnet50", "mode": "fp16cl_graph", "batch": 32, "ms": 2.4,
               "img_s": 13333.0},
              {"model": "resnet50", "mode": "fp16cl", "batch": 256, "ms": 15.0, "img_s": 17066.0}]
        ptt = [{"model": "resnet50", "mode": "eager", "precision": "fp16", "batch": 256,
                "img_s": 5900.0},
               {"model": "resnet50", "mode": "graph", "precision": "fp16", "batch": 256,
                "img_s": 9000.0},  # the graph peer is not the one the issue names
               {"model": "efficientnet_b0", "mode": "eager", "precision": "fp16", "batch": 256,
                "img_s": 9000.0}]
        with tempfile.TemporaryDirectory() as d:
            ours, p, pt_train = self.files(d, benchmarks, pt, ptt)
            out = io.StringIO()
            with redirect_stdout(out):
                rc = tt.main(["--cnnbench", ours, "--pytorch", p, "--pytorch-train", pt_train,
                              "--out-md", os.path.join(d, "t.md"), "--check"])
            self.assertTrue(os.path.exists(os.path.join(d, "t.md")))
        self.assertEqual(rc, 1)
        text = out.getvalue()
        rows = {(r[0], r[1], r[2]): r for r in
                [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
                 if line.startswith("| ") and "network" not in line]}
        self.assertEqual(rows[("resnet50", "graph", "1")][-1], "met")
        self.assertEqual(rows[("resnet50", "graph", "1")][5], "1,111")
        self.assertEqual(rows[("resnet50", "graph", "1")][6], "2.90x")
        self.assertEqual(rows[("resnet50", "graph", "32")][-1], "missed")
        self.assertEqual(rows[("resnet50", "graph", "256")][-1], "met, no peer")  # eager row only
        self.assertEqual(rows[("vgg16", "graph", "256")][-1], "not run")
        self.assertEqual(rows[("inception_v3", "graph", "256")][-1], "not run")
        self.assertEqual(rows[("resnet50", "train", "256")][-1], "met")
        self.assertEqual(rows[("resnet50", "train", "256")][5], "5,900")
        self.assertEqual(rows[("efficientnet_b0", "train", "256")][-1], "missed")  # peer ahead
        self.assertIn("vgg16 graph batch 256: out of memory", text)
        self.assertIn("2 of 8 targets met", text)

    def test_all_met_passes_the_check_and_a_cut_off_run_is_read(self):
        benchmarks = []
        peers, train_peers = [], []
        for net, mode, batch, target, _ in tt.TARGETS:
            ms = batch / (target * 1.1) * 1e3
            benchmarks += bench(net, mode, batch, [ms, ms, ms])
            if mode == "train":
                train_peers.append({"model": net, "mode": "eager", "precision": "fp16",
                                    "batch": batch, "img_s": target / 2})
            else:
                peers.append({"model": net, "mode": "fp16cl_graph", "batch": batch,
                              "ms": 1.0, "img_s": target / 2})
        with tempfile.TemporaryDirectory() as d:
            ours, p, pt_train = self.files(d, benchmarks, peers, train_peers)
            with redirect_stdout(io.StringIO()) as out:
                self.assertEqual(tt.main(["--cnnbench", ours, "--pytorch", p, "--pytorch-train",
                                          pt_train, "--check"]), 0)
            self.assertIn("8 of 8 targets met", out.getvalue())
            # Cut off after the first benchmark's entries: what finished is kept.
            with open(ours) as f:
                text = json.dumps(json.load(f), indent=2)  # as Google Benchmark writes it
            cut = text[:text.index("resnet50/fp16/graph/batch:32")]
            with open(ours, "w") as f:
                f.write(cut)
            with redirect_stdout(io.StringIO()) as out:
                self.assertEqual(tt.main(["--cnnbench", ours, "--pytorch", p, "--pytorch-train",
                                          pt_train, "--check"]), 1)
            self.assertIn("1 of 8 targets met", out.getvalue())
            self.assertIn("cut off", out.getvalue())

    def test_runs_on_one_card_are_merged_and_other_cards_refused(self):
        # The first run is cut off after ResNet-50 at 1; the second has the rest and its own
        # ResNet-50 at 1, which replaces the cut-off run's (its repetitions may be incomplete).
        first = bench("resnet50", "graph", 1, [0.30, 0.30, 0.30])      # 3,333
        second = (bench("resnet50", "graph", 1, [0.50, 0.50, 0.50])    # 2,000: taken
                  + bench("efficientnet_b0", "train", 256, [30.0]))    # 8,533
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, (benchmarks, ctx) in enumerate(
                    ((first, {"gpu_name": "NVIDIA H100", "gpu_uuid": "GPU-a", "cnnbench_git": "x"}),
                     (second, {"gpu_name": "NVIDIA H100", "gpu_uuid": "GPU-a",
                               "cnnbench_git": "x"}))):
                path = os.path.join(d, f"run{i}.json")
                with open(path, "w") as f:
                    json.dump({"context": ctx, "benchmarks": benchmarks}, f)
                paths.append(path)
            with open(paths[0]) as f:
                text = json.dumps(json.load(f), indent=2)
            with open(paths[0], "w") as f:
                f.write(text[:text.rindex("}")])  # cut off: no closing brace
            with redirect_stdout(io.StringIO()) as out:
                self.assertEqual(tt.main(["--cnnbench", paths[0], "--cnnbench", paths[1]]), 0)
            text = out.getvalue()
            self.assertIn("2 runs on this one card", text)
            self.assertIn("| resnet50 | graph | 1 | 2,000", text)
            self.assertIn("| efficientnet_b0 | train | 256 | 8,533", text)
            self.assertIn("The cnnbench run was cut off", text)  # six targets still lack one
            # Another card (UUID) is refused by name.
            with open(paths[1], "w") as f:
                json.dump({"context": {"gpu_name": "NVIDIA H100", "gpu_uuid": "GPU-b"},
                           "benchmarks": second}, f)
            from contextlib import redirect_stderr
            err = io.StringIO()
            with redirect_stderr(err), redirect_stdout(io.StringIO()):
                self.assertEqual(tt.main(["--cnnbench", paths[0], "--cnnbench", paths[1]]), 2)
            self.assertIn("is from another card (GPU-b)", err.getvalue())
            # Another build of the same card is refused too.
            with open(paths[1], "w") as f:
                json.dump({"context": {"gpu_name": "NVIDIA H100", "gpu_uuid": "GPU-a",
                                       "cnnbench_git": "y"}, "benchmarks": second}, f)
            err = io.StringIO()
            with redirect_stderr(err), redirect_stdout(io.StringIO()):
                self.assertEqual(tt.main(["--cnnbench", paths[0], "--cnnbench", paths[1]]), 2)
            self.assertIn("is from another build (y)", err.getvalue())

    def test_bad_input_says_so(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.json")
            with open(bad, "w") as f:
                f.write("not json")
            from contextlib import redirect_stderr
            err = io.StringIO()
            with redirect_stderr(err):
                self.assertEqual(tt.main(["--cnnbench", bad]), 2)
                self.assertEqual(tt.main(["--cnnbench", os.path.join(d, "missing.json")]), 2)
            self.assertIn("targets_table:", err.getvalue())


if __name__ == "__main__":
    unittest.main()
