"""Tests of the PyTorch device-use figure: pytorch_train_baseline.py's device_used_mib row field and
tools/compare_train.py's "PyTorch device MiB" column (no torch needed).

    python3 -m unittest -v tests/test_compare_train_device.py
"""
import contextlib
import io
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import compare_train as ct  # noqa: E402
import pytorch_train_baseline as ptb  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_tools import TempFiles  # noqa: E402  (temporary files per test)


def cnnbench_train_rows(net, batch, img_s, arena, device):
    """One repetition and its median aggregate, as cnnbench writes a train benchmark."""
    name = f"{net}/fp16/train/batch:{batch}"
    ms = batch / img_s * 1e3
    common = {"run_name": name, "repetitions": 1, "threads": 1, "time_unit": "ms",
              "real_time": ms, "cpu_time": ms / 10, "img_per_s": img_s, "ms_per_batch": ms,
              "batch": batch, "arena_peak_mib": arena, "device_peak_mib": device}
    return [dict(common, name=name, run_type="iteration", repetition_index=0, iterations=10),
            dict(common, name=name + "_median", run_type="aggregate", aggregate_name="median",
                 aggregate_unit="time")]


def pytorch_row(model, mode, batch, img_s, reserved, device=None):
    r = {"model": model, "mode": mode, "precision": "fp16", "batch": batch, "img_s": img_s,
         "peak_reserved_mib": reserved, "peak_allocated_mib": reserved / 2}
    if device is not None:
        r["device_used_mib"] = device
    return r


class CompareTrainDeviceColumnTest(TempFiles):

    def run_tool(self, pt_rows, *extra):
        entries = (cnnbench_train_rows("resnet50", 32, 3000.0, 5000.0, 6200.0)
                   + cnnbench_train_rows("resnet50", 64, 3000.0, 9000.0, 10200.0))
        cb = self.write("cb.json", {"context": {"gpu_name": "NVIDIA H200"}, "benchmarks": entries})
        pt = self.write("pt.json", {"torch": "2.11.0", "gpu": "NVIDIA H200", "rows": pt_rows})
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = ct.main(["--cnnbench", cb, "--pytorch", pt, *extra])
        return rc, out.getvalue()

    def test_the_column_shows_the_compared_modes_device_use(self):
        rc, out = self.run_tool([
            pytorch_row("resnet50", "eager", 32, 2000.0, 6000.0, device=6900.0),
            pytorch_row("resnet50", "graph", 32, 2800.0, 5500.0, device=6400.0),
            pytorch_row("resnet50", "graph", 64, 2800.0, 9500.0)],  # an older row: no figure
            "--check")
        self.assertIn("| PyTorch reserved MiB | PyTorch device MiB | status |", out)
        self.assertIn("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|", out)
        # batch 32: the faster mode (graph) is the one compared: its reserved and device figures
        self.assertIn("| 1.07x | 5,000 | 6,200 | 5,500 | 6,400 | ok |", out)
        self.assertIn("| 1.07x | 9,000 | 10,200 | 9,500 | – | ok |", out)
        self.assertEqual(rc, 0)  # --check: arena against reserved, the device figure not used

    def test_check_still_compares_the_arena_with_reserved(self):
        # The arena (5,000) above reserved (4,000) fails though the device figure is higher still.
        rc, out = self.run_tool([pytorch_row("resnet50", "graph", 32, 2800.0, 4000.0,
                                             device=90000.0),
                                 pytorch_row("resnet50", "graph", 64, 2800.0, 9500.0,
                                             device=100.0)],
                                "--check")
        self.assertEqual(rc, 1)
        self.assertIn("| 4,000 | 90,000 | FAIL: more memory |", out)
        self.assertIn("| 9,500 | 100 | ok |", out)

    def test_an_older_file_has_no_such_column(self):
        oom = {"model": "resnet50", "mode": "eager", "precision": "fp16", "batch": 64,
               "error": "out of memory"}
        rc, out = self.run_tool([pytorch_row("resnet50", "graph", 32, 2800.0, 5500.0), oom])
        self.assertEqual(rc, 0)
        self.assertNotIn("PyTorch device MiB", out)
        self.assertIn("| 5,000 | 6,200 | 5,500 | ok |", out)
        self.assertIn("| 9,000 | 10,200 | – | ok (PyTorch out of memory) |", out)


class BaselineRowTest(unittest.TestCase):
    def test_device_used_mib_in_a_row(self):
        a = ptb.parse_args(["--tiny-imagenet"])
        r = ptb.make_row("efficientnet_b0", "eager", "fp16", 64, 64, a, reps=[1.0],
                         iters_per_rep=1, peak_allocated=3 * 2**20, peak_reserved=5 * 2**20,
                         device_used=6 * 2**20)
        self.assertEqual((r["peak_reserved_mib"], r["device_used_mib"]), (5.0, 6.0))
        r = ptb.make_row("efficientnet_b0", "eager", "fp16", 64, 64, a, reps=[1.0],
                         iters_per_rep=1, peak_allocated=0, peak_reserved=0)
        self.assertIsNone(r["device_used_mib"])
        self.assertNotIn("device_used_mib",
                         ptb.make_row("resnet50", "eager", "fp16", 9, 224, a, error="x"))

    def test_library_allocation_failures_are_out_of_memory(self):
        for text in ("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
                     "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
                     "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
                     "CUDA error: out of memory\nCUDA kernel errors might be ..."):
            self.assertEqual(ptb.error_text(RuntimeError(text)), "out of memory", text)
        self.assertEqual(ptb.error_text(RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED\nx")),
                         "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED")
        self.assertEqual(ptb.first_line(ValueError("")), "ValueError")


if __name__ == "__main__":
    unittest.main()
