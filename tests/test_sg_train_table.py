"""Tests of tools/sg_train_table.py on files in the two writers' layouts (harness/
stylegan_train_main.cpp's run_bench and tools/stylegan3_train_reference.py's bench). No run of
either has finished on a GPU yet, so the figures are made up here; the layouts are the writers'.

Run from the repository root:  python3 -m unittest -v tests/test_sg_train_table.py
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

import sg_train_table as sgt  # noqa: E402


def ours_doc(rows, precision="tf32"):
    return {"context": {"gpu_name": "NVIDIA H200"},
            "settings": {"network": "stylegan3_t", "discriminator": "stylegan2 resnet",
                         "resolution": 256, "precision": precision},
            "rows": rows}


def torch_doc(rows, precision="tf32"):
    return {"torch": "2.11.0", "settings": {"precision": precision},
            "network": {"model": "stylegan3-t-256"}, "rows": rows}


def write(d, name, doc):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


OURS_8 = {"batch": 8, "fits": True, "ms": 200.0, "img_s": 40.0, "s_per_5kimg": 125.0,
          "trainer_mib": 3000.0, "device_used_mib": 4100.0,
          "phase_ms": {"Gmain": 90.0, "Dmain": 80.0, "Dreg": 30.0}}
TORCH_8 = {"batch": 8, "ms": 400.0, "img_s": 20.0, "s_per_5kimg": 250.0, "peak_mib": 5200.0,
           "phase_ms": {"Gmain": 180.0, "Dmain": 150.0, "Dreg": 60.0, "Gema": 10.0}}


class Table(unittest.TestCase):
    def test_rows_join_on_precision_and_batch(self):
        with tempfile.TemporaryDirectory() as d:
            ours = write(d, "ours.json", ours_doc([
                dict(OURS_8, batch=4, ms=120.0, img_s=33.3), OURS_8,
                {"batch": 4096, "fits": False, "error": "cudaErrorMemoryAllocation"}]))
            torch = write(d, "pt.json", torch_doc([TORCH_8, {"batch": 16, "error": "out of memory"}]))
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(sgt.main(["--ours", ours, "--pytorch", torch]), 0)
        text = out.getvalue()
        self.assertIn("| 8 | tf32 | 200.00 | 40.0 | 400.00 | 20.0 | 2.00x | 125 | 3,000, 4,100 | "
                      "5,200 | 90.0 / 80.0 / 30.0 | 180.0 / 150.0 / 60.0 |", text)
        self.assertIn("| 4 | tf32 | 120.00 | 33.3 | — | — | — |", text)
        self.assertIn("| 16 | tf32 | — | — | error: out of memory |", text)
        self.assertIn("| 4096 | tf32 | error: cudaErrorMemoryAllocation |", text)
        rows = [ln for ln in text.splitlines() if ln.startswith("| ") and "tf32" in ln]
        self.assertEqual([int(r.split("|")[1]) for r in rows], [4, 8, 16, 4096])

    def test_a_later_file_replaces_a_row(self):
        with tempfile.TemporaryDirectory() as d:
            a = write(d, "a.json", ours_doc([OURS_8]))
            b = write(d, "b.json", ours_doc([dict(OURS_8, ms=100.0, img_s=80.0)]))
            rows = sgt.merge([a, b], True)
        self.assertEqual(rows[("tf32", 8)]["img_s"], 80.0)

    def test_files_swapped_or_bad_are_named(self):
        with tempfile.TemporaryDirectory() as d:
            ours = write(d, "ours.json", ours_doc([OURS_8]))
            torch = write(d, "pt.json", torch_doc([TORCH_8]))
            bad = write(d, "bad.json", ours_doc([{"batch": 8, "fits": True}]))
            for args, needle in ((["--ours", torch], "pt.json: not a cnnbench_stylegan_train"),
                                 (["--ours", ours, "--pytorch", ours],
                                  "ours.json: not a stylegan3_train_reference.py bench"),
                                 (["--ours", bad], "bad.json: row 1 lacks ms or img_s"),
                                 (["--ours", os.path.join(d, "none.json")], "none.json")):
                err = io.StringIO()
                with redirect_stderr(err), redirect_stdout(io.StringIO()):
                    self.assertEqual(sgt.main(args), 2)
                self.assertIn(needle, err.getvalue())


if __name__ == "__main__":
    unittest.main()
