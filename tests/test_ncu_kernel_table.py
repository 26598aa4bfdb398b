"""tools/ncu_kernel_table.py: ncu's raw CSV summed by kernel (stdlib only)."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import ncu_kernel_table as nk  # noqa: E402

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","dram__bytes_read.sum","dram__bytes_write.sum",'
          '"gpu__time_duration.sum","launch__grid_size","launch__registers_per_thread",'
          '"sm__warps_active.avg.pct_of_peak_sustained_active"')
UNITS = '"","","","","","","","","","","","Mbyte","Kbyte","usecond","","register/thread","%"'


def row(i, name, grid, read_mb, write_kb, us, regs=80, occ=50.0):
    return (f'"{i}","1","cnnbench_train_step","h","{name}","1","7","(256, 1, 1)","(1, {grid}, 1)",'
            f'"0","9.0","{read_mb}","{write_kb}","{us}","{grid}","{regs}","{occ}"')


SUMS = "void cnnbench::<unnamed>::bn_grad_sums_vec<__half, 8, (Act)1, true, (MaskFrom)2, 3>(const T1 *)"
FIN = "void cnnbench::ck::channel_sums_finalize<2, cnnbench::<unnamed>::BnGradOut>(const float *, int)"


class NcuKernelTableTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, text):
        path = os.path.join(self.dir, "ncu.csv")
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_tool(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = nk.main(list(argv))
        return rc, out.getvalue(), err.getvalue()

    def test_short_names(self):
        self.assertEqual(nk.short_name(SUMS), "bn_grad_sums_vec")
        self.assertEqual(nk.short_name(FIN), "channel_sums_finalize")
        self.assertEqual(nk.short_name("bn_apply_vec"), "bn_apply_vec")

    def test_sums_by_kernel_across_application_output_and_units(self):
        path = self.write("\n".join([
            "resnet50 fp16 batch 256: step ...", "==PROF== Connected to process 1", HEADER, UNITS,
            row(1, SUMS, 1024, "50", "100", "30"),
            "==PROF== Profiling \"x\": 0%....50%....100% - 1 pass",
            row(2, FIN, 8, "2", "10", "1,000", regs=40, occ=10.0),
            row(3, SUMS, 512, "25", "0", "20"),
            row(4, FIN, 8, "n/a", "10", "bad")]))  # no time: skipped
        rc, out, err = self.run_tool(path)
        self.assertEqual(rc, 0, err)
        lines = [l for l in out.splitlines() if l.startswith("| ")]
        # Ordered by total time: the finalize's 1,000 us first.
        self.assertTrue(lines[1].startswith("| channel_sums_finalize | 1 | 1,000.0 |"), lines[1])
        sums = lines[2].split(" | ")
        self.assertEqual(sums[0], "| bn_grad_sums_vec")
        self.assertEqual(sums[1:4], ["2", "50.0", "25.00"])
        self.assertEqual(sums[4:6], ["75.0", "0.1"])  # MB read, written (100 kB)
        self.assertEqual(sums[6], f"{(75e6 + 0.1e6) / 50e3:,.0f}")  # GB/s from bytes and time
        self.assertIn("| all | 3 | 1,050.0 | | 77.0 | 0.1 | 73 | | |", out)

    def test_time_units_and_unknown_bytes(self):
        # ncu's base units: nanoseconds and bytes. A kernel whose bytes are n/a shows "-", and so
        # does the total's GB/s (its time would otherwise dilute the others' bytes).
        units = UNITS.replace("usecond", "nsecond").replace("Mbyte", "byte").replace("Kbyte", "byte")
        path = self.write("\n".join([HEADER, units, row(1, SUMS, 64, "2000000", "1000000", "2,000"),
                                     row(2, FIN, 8, "n/a", "0", "500")]))
        rc, out, err = self.run_tool(path)
        self.assertEqual(rc, 0, err)
        self.assertIn("| bn_grad_sums_vec | 1 | 2.0 | 2.00 | 2.0 | 1.0 | 1,500 |", out)
        self.assertIn("| channel_sums_finalize | 1 | 0.5 | 0.50 | - | - | - |", out)
        self.assertIn("| all | 2 | 2.5 | | - | - | - | | |", out)
        path = self.write("\n".join([HEADER, units.replace("nsecond", "msecond"),
                                     row(1, SUMS, 64, "3000000", "0", "0.001")]))
        rc, out, _ = self.run_tool(path, "--out-md", os.path.join(self.dir, "t.md"))
        self.assertEqual(rc, 0)
        self.assertIn("| all | 1 | 1.0 | | 3.0 | 0.0 | 3,000 | | |", out)  # 3 MB in 1 us
        with open(os.path.join(self.dir, "t.md")) as f:
            self.assertIn("| bn_grad_sums_vec | 1 | 1.0 |", f.read())

    def test_by_grid_splits_a_kernels_shapes(self):
        path = self.write("\n".join([HEADER, UNITS, row(1, SUMS, 1024, "50", "0", "30"),
                                     row(2, SUMS, 512, "25", "0", "20"),
                                     row(3, SUMS, 1024, "50", "0", "30")]))
        rc, out, _ = self.run_tool(path, "--by-grid")
        self.assertEqual(rc, 0)
        self.assertIn("| bn_grad_sums_vec | 1024 | 2 | 60.0 |", out)
        self.assertIn("| bn_grad_sums_vec | 512 | 1 | 20.0 |", out)

    def test_bad_input_one_line_exit_2(self):
        cases = {
            "no header": "just the application's output\n",
            "no time column": HEADER.replace("gpu__time_duration.sum", "other") + "\n" + UNITS,
            "unknown unit": HEADER + "\n" + UNITS.replace("usecond", "fortnight") + "\n" +
                            row(1, SUMS, 1, "1", "1", "1"),
            "no rows": HEADER + "\n" + UNITS + "\n",
        }
        for what, text in cases.items():
            with self.subTest(what):
                rc, out, err = self.run_tool(self.write(text))
                self.assertEqual(rc, 2)
                self.assertEqual(out, "")
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn("ncu.csv", err)
        rc, _, err = self.run_tool(os.path.join(self.dir, "missing.csv"))
        self.assertEqual(rc, 2)
        self.assertIn("missing.csv: cannot read", err)


if __name__ == "__main__":
    unittest.main()
