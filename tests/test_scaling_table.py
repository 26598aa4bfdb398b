"""Tests of tools/scaling_table.py: the seed's scaling efficiencies computed from its own rows,
our cnnbench_dp rows in the table, and bad inputs.

Run from the repository root:  python3 -m unittest -v tests/test_scaling_table.py
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

import scaling_table as sct  # noqa: E402


def dp_file(directory, name, world, rows):
    """A file in cnnbench_dp's --json layout (harness/dp_train_main.cpp's bench())."""
    doc = {"context": {"gpu_name": "NVIDIA H200", "nccl_loaded": "2.28.9", "world_size": world},
           "results": rows}
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def dp_row(world, batch, global_ips, one_ips):
    return {"network": "resnet50", "precision": "fp16", "batch_per_gpu": batch,
            "world_size": world, "global_img_per_s": global_ips,
            "per_gpu_img_per_s": global_ips / world, "one_gpu_img_per_s": one_ips,
            "scaling_efficiency": global_ips / world / one_ips, "exposed_comm_ms": 1.25}


class SeedScaling(unittest.TestCase):
    def setUp(self):
        self.rows = sct.seed_scaling(sct.read_seed(sct.DEFAULT_SEED))

    def find(self, gpu, net, gpus, batch):
        hits = [r for r in self.rows
                if r["gpu"] == gpu and r["network"] == net and r["gpus"] == gpus
                and r["batch"] == batch]
        self.assertEqual(len(hits), 1, (gpu, net, gpus, batch))
        return hits[0]

    def test_resnet50_on_four_gtx_1080(self):
        # The seed: 93.37 img/s at batch 32 on 4 GPUs, 39.83 at batch 8 on one.
        r = self.find("GTX 1080", "resnet50", 4, 32)
        self.assertEqual(r["batch_per_gpu"], 8)
        self.assertAlmostEqual(r["efficiency"], 93.37 / (4 * 39.83), places=9)

    def test_alexnet_batch_is_read_times_eight(self):
        # AlexNet's batch column 32 is 256 images: 2,973.28 img/s on 4 GTX 1080 Ti, and the
        # one-GPU row at column 8 (64 images) reads 1,770.16.
        r = self.find("GTX 1080 Ti", "alexnet", 4, 256)
        self.assertEqual(r["batch_per_gpu"], 64)
        self.assertAlmostEqual(r["efficiency"], 2973.28 / (4 * 1770.16), places=9)

    def test_two_p100s_and_rows_without_figures_left_out(self):
        self.assertTrue(any(r["gpus"] == 2 and r["gpu"] == "Tesla P100" for r in self.rows))
        # 4x GTX 1080 resnet50 at batches 1 and 2 have no figure ("too many slices").
        self.assertFalse(any(r["gpu"] == "GTX 1080" and r["network"] == "resnet50"
                             and r["batch"] < 4 for r in self.rows))

    def test_an_efficiency_above_one_is_flagged(self):
        text = sct.table([], self.rows)
        flagged = [ln for ln in text.splitlines() if sct.SUSPECT in ln]
        self.assertEqual(len(flagged), 1)
        self.assertIn("| alexnet | GTX 1080 | 4 | 128 |", flagged[0])


class OurRuns(unittest.TestCase):
    def test_rows_sorted_and_shown(self):
        with tempfile.TemporaryDirectory() as d:
            a = dp_file(d, "g2.json", 2, [dp_row(2, 256, 5000.0, 2600.0)])
            b = dp_file(d, "g1.json", 1, [dp_row(1, 256, 2590.0, 2600.0)])
            rows = sct.read_runs([a, b])
            self.assertEqual([r["world_size"] for r in rows], [1, 2])
            text = sct.table(rows, [])
            self.assertIn("| resnet50 | fp16 | NVIDIA H200 | 256 | 2 | 5,000 | 2,500 | 2,600 | "
                          "0.962 | 1.25 |", text)

    def test_bad_inputs_exit_2_naming_the_file(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.json")
            with open(bad, "w") as f:
                f.write("{")
            lacking = dp_file(d, "lacking.json", 2, [{"network": "resnet50"}])
            badcsv = os.path.join(d, "seed.csv")
            with open(badcsv, "w") as f:
                f.write("source,gpu,gpus,network,batch,images_per_sec,note\nX,Y,two,z,1,3.0,\n")
            for args, needle in (([bad], "bad.json: not JSON"),
                                 ([lacking], "lacks precision"),
                                 ([os.path.join(d, "none.json")], "none.json"),
                                 (["--seed", badcsv], "seed.csv:2: bad row")):
                err = io.StringIO()
                with redirect_stderr(err), redirect_stdout(io.StringIO()):
                    self.assertEqual(sct.main(args), 2)
                self.assertIn(needle, err.getvalue())


if __name__ == "__main__":
    unittest.main()
