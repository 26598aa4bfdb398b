"""Tests of tools/sanitizer_matrix.py on a small made-up results tree: a cell clean in one table
and timed out in another, one only incomplete (a cuda::barrier overflow), one with findings, one
clean under a kernel filter, one clean with kernels excluded, racecheck rows read with their logs
(races in vendor kernels alone, a race with one of ours, errors not all shown), a run killed with
the host's memory of its table, a run at batch 1, PyTorch-alone repro logs, expected cells with no
row, a row outside the matrix, a malformed row, both header layouts, a unit test's row, and a
missing root.

Run from the repository root:  python3 -m unittest -v tests/test_sanitizer_matrix.py
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "sanitizer_matrix.py")
sys.path.insert(0, os.path.join(ROOT, "tools"))

import sanitizer_matrix as sm  # noqa: E402

NEW = ("| network | precision | mode | tool | errors | of which unchecked launches | exit | s | "
       "first error in |\n|---|---|---|---|---:|---:|---:|---:|---|\n")
OLD = ("| network | precision | mode | tool | errors | exit | first error in |\n"
       "|---|---|---|---|---:|---:|---|\n")

def RACE(kernel, read, write):
    """racecheck's report of one race, as compute-sanitizer 2025.3 prints it."""
    return (f"========= Error: Race reported between Read access at {kernel}+{read}\n"
            f"=========     and Write access at {kernel}+{write} [128 hazards]\n=========\n")


FILES = {
    # The older layout (no unchecked-launch or seconds column): the clean run of the cell.
    "2026-12-05_h100/call64/z/summary.md":
        "- memcheck: `--check-bulk-copy yes`\n\n" + OLD
        + "| resnet50 | fp16 | infer | memcheck | 0 | 0 | – |\n"
        + "| vgg16 | fp16 | infer | memcheck | 0 | 0 | – |\n",
    # A later table (path sorts after the first) where the same cell timed out, the overflow cell,
    # the findings cell, and a row with a cell missing (line 8).
    "2026-12-06_h100/call99/s/summary.md":
        "- synccheck: `--num-cuda-barriers 4096`\n\n" + NEW
        + "| resnet50 | fp16 | infer | memcheck | ? | 0 | 124 | 300 | (timed out after 300 s) |\n"
        + "| resnet50 | fp16 | infer | synccheck | 1 | 0 | 1 | 14 | – (cuda::barrier overflow at "
          "32768: incomplete; barriers 4096 16384 32768) |\n"
        + "| alexnet | fp32 | train | initcheck | 12 | 2 | 0 | 9 | at cnnbench::pool_vec<float> |\n"
        + "| vgg16_bn | fp32 | train | synccheck | 0 | 0 | 0 | 5 |\n"
        + "\n- host memory while the runs went: lowest available 1 MiB\n",
    # Clean under a kernel filter, and an extra argument.
    "2026-12-05_h100/call77/z/r/summary.md":
        "- racecheck: `--num-cuda-barriers 4096`\n"
        "- only the kernels `--kernel-name kns=cnnbench` names are checked\n"
        "- every run with `--verify=64`\n\n" + NEW
        + "| alexnet | fp32 | infer | racecheck | 0 | 0 | 0 | 8 | – |\n",
    # Clean with some kernels excluded (EXCLUDE_KERNELS).
    "2026-12-07_h100/call108/x/summary.md":
        "- racecheck: `--num-cuda-barriers 4096`\n"
        "- the kernels `--kernel-name-exclude kns=nvjet` names are not checked\n\n" + NEW
        + "| resnet50 | fp16 | infer | racecheck | 0 | 0 | 0 | 88 | – |\n",
    # A unit test's racecheck run: listed apart, under its folder's name.
    "2026-12-06_h100/call102/r/GpuOps.PoolingMatchesReference/summary.md":
        NEW + "| test_gpu | all | tests | racecheck | 0 | 0 | 0 | 2 | – |\n",
    # Racecheck rows that lost their count ('?', the older script), their logs beside them: races
    # between vendor kernels alone (VENDOR); a race with one of ours (FINDINGS); more errors counted
    # than races shown (FINDINGS: the rest's kernels are unknown).
    "2026-12-05_h100/call76/z/b/summary.md":
        NEW + "| alexnet | fp16 | infer | racecheck | ? | 0 | 0 | 59 | – |\n"
        + "| alexnet | fp16 | train | racecheck | ? | 0 | 0 | 186 | – |\n"
        + "| vgg16_bn | fp16 | infer | racecheck | ? | 0 | 0 | 90 | – |\n",
    "2026-12-05_h100/call76/z/b/alexnet_fp16_infer_racecheck.log":
        RACE("nvjet_sm90_hsh_64x8_64x16_2x1_v_bz_splitK_relubias_TNT", "0xb30", "0x2f60")
        + RACE("sm90_xmma_fprop_implicit_gemm_f16f16", "0x10", "0x20")
        + "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n",
    "2026-12-05_h100/call76/z/b/alexnet_fp16_train_racecheck.log":
        RACE("nvjet_sm90_hsh_64x8_64x16_2x1_v_bz_NNT", "0xb30", "0x2f60")
        + RACE("void cnnbench::(anonymous namespace)::pool_kernel<__half>(const __half *)", "0x40",
               "0x80")
        + "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n",
    "2026-12-05_h100/call76/z/b/vgg16_bn_fp16_infer_racecheck.log":
        RACE("nvjet_sm90_hsh_64x8_64x16_2x1_v_bz_NNT", "0xb30", "0x2f60")
        + "========= RACECHECK SUMMARY: 5 hazards displayed (5 errors, 0 warnings)\n",
    # tools/racecheck_torch_repro.py's logs: one with a race (listed), one without (not listed).
    "2026-12-06_h100/call118/t/plain_fp16.log":
        "========= COMPUTE-SANITIZER\ntorch 2.11.0+cu130, cuDNN 91900, NVIDIA H100 80GB HBM3, "
        "fp16, batch 2\n" + RACE("nvjet_sm90_hsh_32x64_64x16_2x1_v_bz_NNN", "0xb00", "0x29e0")
        + "ok\n========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n",
    "2026-12-06_h100/call118/t/exclude_fp32.log":
        "torch 2.11.0+cu130, cuDNN 91900, NVIDIA H100 80GB HBM3, fp32, batch 2\nok\n"
        "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n",
    # A run killed with status 9 (the OOM killer's signal, calls 128 and 129), and the table's
    # line of the host's memory under it.
    "2026-12-06_h100/call128/f/train/summary.md":
        NEW + "| resnet152 | fp16 | train | racecheck | 0 | 0 | 9 | 40 | (the target ended with "
              "status 9 and no summary of its own) |\n"
        + "\n- host memory while the runs went (`host_mem.log`): lowest available 4101 MiB, "
          "largest process 81371 MiB resident\n",
    # A run killed (status 9) after one race between a vendor kernel's own accesses (call 136's
    # Inception-BN): incomplete, not a finding.
    "2026-12-06_h100/call136/k/train/summary.md":
        NEW + "| inception_bn | fp16 | train | racecheck | 1 | 0 | 9 | 110 | – |\n"
        + "\n- host memory while the runs went (`host_mem.log`): lowest available 15 MiB, "
          "largest process 127400 MiB resident\n",
    "2026-12-06_h100/call136/k/train/inception_bn_fp16_train_racecheck.log":
        RACE("nvjet_sm90_hsh_64x32_64x16_1x2_h_bz_NTT", "0xaf0", "0x29b0")
        + "========= Error: process didn't terminate successfully\n"
        + "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n",
    # A run at batch 1 (sanitize_gpu.sh BATCH=1): clean, and its detail says the batch.
    "2026-12-07_h100/call133/k/summary.md":
        "- racecheck: `--num-cuda-barriers 4096`\n- every network at batch 1\n\n" + NEW
        + "| efficientnet_b0 | fp16 | train | racecheck | 0 | 0 | 0 | 61 | – |\n",
    # Not a sanitizer table: skipped without a word.
    "README.md": "| network | img/s |\n|---|---:|\n| resnet50 | 3000 |\n",
}
MALFORMED_LINE = "2026-12-06_h100/call99/s/summary.md:8"


def cells(text):
    """{(tool, network, precision, mode): [status, detail, source, rows]} from the tool's tables."""
    out, tool = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            m = re.match(r"## (\w+):", line)
            tool = m.group(1) if m and m.group(1) in sm.TOOLS else None
            continue
        if tool and line.startswith("| ") and not line.startswith("| network"):
            c = [x.strip() for x in line.strip("|").split(" | ")]
            out[(tool, c[0], c[1], c[2])] = c[3:]
    return out


class Matrix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root = os.path.join(cls.tmp.name, "results")
        for rel, text in FILES.items():
            path = os.path.join(cls.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        cls.out = os.path.join(cls.root, "sanitizer_matrix.md")
        cls.first = cls.tool("--root", cls.root, "--out", cls.out)
        with open(cls.out) as f:
            cls.text = f.read()
        cls.cells = cells(cls.text)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @staticmethod
    def tool(*args):
        return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)

    def test_exit_zero_and_nothing_on_stdout_with_out(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        self.assertEqual(self.first.stdout, "")

    def test_clean_in_one_table_beats_a_timeout_in_a_later_one(self):
        status, detail, source, rows = self.cells[("memcheck", "resnet50", "fp16", "infer")]
        self.assertEqual(status, "CLEAN")
        self.assertEqual(source, "2026-12-05_h100/call64/z/summary.md:5")
        self.assertEqual(rows, "2 (1 clean, 1 incomplete)")

    def test_overflow_alone_is_incomplete(self):
        status, detail, source, rows = self.cells[("synccheck", "resnet50", "fp16", "infer")]
        self.assertEqual(status, "INCOMPLETE")
        self.assertIn("cuda::barrier overflow at 32768: incomplete", detail)
        self.assertEqual(source, "2026-12-06_h100/call99/s/summary.md:6")

    def test_checked_errors_beyond_unchecked_launches_are_findings(self):
        status, detail, source, rows = self.cells[("initcheck", "alexnet", "fp32", "train")]
        self.assertEqual(status, "FINDINGS")
        self.assertTrue(detail.startswith("10 errors (and 2 unchecked launches)"), detail)
        self.assertIn("cnnbench::pool_vec", detail)

    def test_races_in_vendor_kernels_alone_are_vendor_with_the_count_from_the_log(self):
        status, detail, source, rows = self.cells[("racecheck", "alexnet", "fp16", "infer")]
        self.assertEqual(status, "VENDOR")
        self.assertIn("2 races, every one between accesses of vendor kernels", detail)
        self.assertIn("`nvjet_sm90_hsh_64x8_64x16_2x1_v_bz_splitK_relubias_TNT`", detail)
        self.assertIn("`sm90_xmma_fprop_implicit_gemm_f16f16`", detail)
        self.assertEqual(rows, "1 (1 vendor)")

    def test_a_race_with_one_of_our_kernels_is_a_finding(self):
        status, detail, source, rows = self.cells[("racecheck", "alexnet", "fp16", "train")]
        self.assertEqual(status, "FINDINGS")
        self.assertTrue(detail.startswith("2 errors"), detail)

    def test_errors_not_all_shown_are_findings_not_vendor(self):
        status, detail, source, rows = self.cells[("racecheck", "vgg16_bn", "fp16", "infer")]
        self.assertEqual(status, "FINDINGS")
        self.assertTrue(detail.startswith("5 errors"), detail)

    def test_the_pytorch_repro_logs_with_races_are_listed(self):
        part = self.text.split("## The vendors' kernels without cnnbench", 1)[1].split("\n## ")[0]
        self.assertIn("| 2026-12-06_h100/call118/t/plain_fp16.log | torch 2.11.0+cu130, cuDNN "
                      "91900, NVIDIA H100 80GB HBM3, fp16, batch 2 | 1 | 1 | "
                      "`nvjet_sm90_hsh_32x64_64x16_2x1_v_bz_NNN` |", part)
        self.assertNotIn("exclude_fp32", part)

    def test_a_killed_run_carries_its_tables_host_memory(self):
        status, detail, source, rows = self.cells[("racecheck", "resnet152", "fp16", "train")]
        self.assertEqual(status, "INCOMPLETE")
        self.assertEqual(detail, "exit 9, 0 errors: the target ended with status 9 and no summary "
                         "of its own; over that table's runs the host had as little as 4,101 MiB "
                         "available (largest process 81,371 MiB)")
        self.assertEqual(source, "2026-12-06_h100/call128/f/train/summary.md:3")

    def test_a_killed_run_with_vendor_races_alone_is_incomplete_not_a_finding(self):
        status, detail, source, rows = self.cells[("racecheck", "inception_bn", "fp16", "train")]
        self.assertEqual(status, "INCOMPLETE")
        self.assertIn("exit 9 before its end; the 1 race(s) it had reported, every one between "
                      "accesses of vendor kernels: `nvjet_sm90_hsh_64x32_64x16_1x2_h_bz_NTT`",
                      detail)
        self.assertIn("as little as 15 MiB available (largest process 127,400 MiB)", detail)

    def test_a_batch_other_than_two_is_named(self):
        status, detail, source, rows = self.cells[("racecheck", "efficientnet_b0", "fp16", "train")]
        self.assertEqual(status, "CLEAN")
        self.assertEqual(detail, "at batch 1")
        self.assertEqual(self.cells[("racecheck", "resnet50", "fp16", "infer")][1],
                         "the kernels `--kernel-name-exclude kns=nvjet` names unchecked")

    def test_kernel_filter_is_clean_but_named(self):
        status, detail, source, rows = self.cells[("racecheck", "alexnet", "fp32", "infer")]
        self.assertEqual(status, "CLEAN")
        self.assertIn("kns=cnnbench", detail)
        self.assertIn("--verify=64", detail)

    def test_kernel_exclusion_is_clean_but_named(self):
        status, detail, source, rows = self.cells[("racecheck", "resnet50", "fp16", "infer")]
        self.assertEqual(status, "CLEAN")
        self.assertEqual(detail, "the kernels `--kernel-name-exclude kns=nvjet` names unchecked")

    def test_expected_cells_without_rows_are_not_run(self):
        self.assertEqual(self.cells[("synccheck", "stylegan_xl", "fp32", "infer")][0], "NOT RUN")
        # The malformed row's cell: had the row been read, it would be CLEAN.
        self.assertEqual(self.cells[("synccheck", "vgg16_bn", "fp32", "train")],
                         ["NOT RUN", "–", "–", "0"])
        # Inference-only networks have no training cells.
        self.assertNotIn(("memcheck", "stylegan_xl", "fp16", "train"), self.cells)

    def test_rows_outside_the_matrix_are_listed_apart(self):
        self.assertNotIn(("memcheck", "vgg16", "fp16", "infer"), self.cells)
        outside = self.text.split("## Rows outside the expected matrix", 1)[1].split("\n## ")[0]
        self.assertIn("memcheck:\n", outside)
        self.assertIn("| vgg16 | fp16 | infer | CLEAN | – | "
                      "2026-12-05_h100/call64/z/summary.md:6 | 1 (1 clean) |", outside)

    def test_every_expected_cell_is_listed_once(self):
        self.assertEqual(len(self.cells), 160)
        self.assertEqual(len(sm.expected_cells()), 160)

    def test_totals(self):
        self.assertIn("**Totals: 4 clean (2 of them under a kernel filter), 1 with races in "
                      "vendor kernels alone, 3 findings, 3 incomplete, 149 not run of 160 "
                      "expected.**", self.text)
        self.assertIn("## synccheck: 0 clean, 0 findings, 1 incomplete, 39 not run of 40 expected",
                      self.text)

    def test_malformed_row_is_reported_with_its_line(self):
        lines = [x for x in self.first.stderr.splitlines() if x]
        self.assertEqual(len(lines), 1, self.first.stderr)
        self.assertIn(MALFORMED_LINE + ": 8 cells where the header has 9; row skipped", lines[0])

    def test_unit_test_rows_are_listed_apart(self):
        self.assertNotIn(("racecheck", "test_gpu", "all", "tests"), self.cells)
        unit = self.text.split("## Unit tests", 1)[1]
        self.assertIn("| GpuOps.PoolingMatchesReference | racecheck | CLEAN | 0 | 0 | 0 | – | "
                      "2026-12-06_h100/call102/r/GpuOps.PoolingMatchesReference/summary.md:3 |",
                      unit)

    def test_rerun_is_identical(self):
        again = self.tool("--root", self.root, "--out", self.out)
        self.assertEqual(again.returncode, 0)
        with open(self.out) as f:
            self.assertEqual(f.read(), self.text)
        to_stdout = self.tool("--root", self.root)
        self.assertEqual(to_stdout.stdout, self.text)
        self.assertIn("from 14 rows of 9 sanitizer tables", self.text)

    def test_the_out_file_is_not_read(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "matrix.md")
            with open(out, "w") as f:
                f.write(NEW + "| alexnet | fp16 | infer | memcheck | 0 | 0 | 0 | 4 | – |\n")
            r = self.tool("--root", d, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                text = f.read()
        self.assertEqual(cells(text)[("memcheck", "alexnet", "fp16", "infer")][0], "NOT RUN")
        self.assertIn("from 0 rows of 0 sanitizer tables", text)

    def test_missing_root_exits_2_with_one_line(self):
        r = self.tool("--root", os.path.join(self.tmp.name, "nowhere"))
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("not a directory", r.stderr)

    def test_classifier_list_is_the_scripts_default(self):
        with open(os.path.join(ROOT, "tools", "sanitize_gpu.sh")) as f:
            m = re.search(r'^NETS=\$\{NETS-"([^"]*)"\}', f.read(), re.M)
        self.assertIsNotNone(m)
        self.assertEqual(tuple(m.group(1).split()), sm.TRAINED)


if __name__ == "__main__":
    unittest.main()
