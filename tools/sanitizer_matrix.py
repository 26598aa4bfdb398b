#!/usr/bin/env python3
"""Issue 10's compute-sanitizer coverage: every summary table of tools/sanitize_gpu.sh under a
results tree, folded into one matrix of (network, precision, mode, tool) cells.

    python3 tools/sanitizer_matrix.py [--root results] [--out FILE]

Reads every .md file under ROOT (recursively) for sanitizer tables: a header row that names the
columns network, precision, mode, tool, errors and exit (older tables lack "of which unchecked
launches" and "s"; columns are found by name, not place), then a separator row, then one row a
run. A row whose cell count differs from its header's is reported on stderr as FILE:LINE and
skipped. Bullets before a table that say "only the kernels `F` names are checked", "the kernels `F`
names are not checked" or "every run with `ARGS`" qualify its rows.

A row is CLEAN where errors, unchecked launches and the exit status are all 0 (and no
cuda::barrier overflow is noted); VENDOR where racecheck counted errors and its log beside the
table (tools/sanitize_gpu.sh's NET_PRECISION_MODE_TOOL.log) shows every one of them, each a race
between accesses of vendor kernels (cuBLAS's nvjet, cuDNN's and CUTLASS's: VENDOR_RE) and none of
ours; FINDINGS where the tool counted more errors than launches it left unchecked; otherwise
INCOMPLETE (timed out, not run, a cuda::barrier overflow, launches left
unchecked, out of memory, the target killed, errors not counted). A cell takes its best row: any
CLEAN one, else the most informative other (FINDINGS, then VENDOR, then the incomplete run that got furthest:
launches unchecked > overflow > a failed exit > timed out (the longest) > not run; a run over every
kernel before one under a kernel filter; then the later file). Expected cells no row names are NOT
RUN. A table that lost its error count ('?', before the script read racecheck's summary line)
takes it from that log where the log has one. The unit tests' rows (network test_gpu, mode tests; the test is the summary's folder) are
listed apart, one line a row.

Logs under ROOT written by tools/racecheck_torch_repro.py (cuDNN's and cuBLAS's kernels through
PyTorch alone, no cnnbench code; its "torch V, cuDNN N, GPU, precision, batch B" line) that report
races are listed after the matrix with the kernels they name: the evidence that a VENDOR cell's
races need no cnnbench code.

Writes markdown to stdout, or to FILE with --out (a FILE inside ROOT is not read back). Exit 0;
2 with one line where ROOT is not a directory or FILE cannot be written.
"""
import argparse
import os
import re
import sys

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
PRECISIONS = ("fp16", "fp32")
# tools/sanitize_gpu.sh's NETS default: the classifiers, each in inference and a training step.
TRAINED = ("alexnet", "alexnet_lrn", "vgg16_bn", "inception_bn", "inception_v3", "resnet50",
           "resnet152", "efficientnet_b0")
# The rest of the zoo the script has been run over (call 76): inference only (their
# NetworkLimits.trains is false in networks/registry.cpp; cnnbench_train_step refuses them).
INFER_ONLY = ("yolor_csp_x", "stylegan2_f", "stylegan3_t", "stylegan_xl")
MODES = ("infer", "train")

CLEAN, FINDINGS, INCOMPLETE, NOT_RUN = "CLEAN", "FINDINGS", "INCOMPLETE", "NOT RUN"
VENDOR = "VENDOR"
# A finding in our kernels outranks one in the vendors' alone: a cell shows it.
STATUS_ORDER = {NOT_RUN: 0, INCOMPLETE: 1, VENDOR: 2, FINDINGS: 3, CLEAN: 4}
# Kernels of cuBLAS (nvjet, the sm90_xmma GEMMs), cuDNN (xmma, cudnn, its runtime-fusion
# kernels) and CUTLASS; ours are all in namespace cnnbench.
VENDOR_RE = re.compile(r"^(void )?(nvjet_|sm\d+_xmma|xmma_|cudnn|cutlass|cublas|ampere_|"
                       r"hopper_|sm\d+_)")
RACE_RE = re.compile(r"Race reported between \w+ access at (.+?)\+0x[0-9a-f]+\s*$")
RACE_AND_RE = re.compile(r"^=+\s+and \w+ access at (.+?)\+0x[0-9a-f]+")
RACE_SUMMARY_RE = re.compile(r"RACECHECK SUMMARY: .*\((\d+) errors?")
ERROR_SUMMARY_RE = re.compile(r"ERROR SUMMARY: (\d+) error")
REPRO_RE = re.compile(r"^torch \S+, cuDNN \d+, .+, \w+, batch \d+$")
# Among INCOMPLETE rows, how far the run got (higher: more was checked).
NOTHING, TIMED_OUT, FAILED, OVERFLOW, UNCHECKED = range(5)

REQUIRED = ("network", "precision", "mode", "tool", "errors", "exit")
BLANK = ("", "–", "-", "—")
FILTER_RE = re.compile(r"only the kernels `([^`]*)` names are checked")
EXCLUDE_RE = re.compile(r"the kernels `([^`]*)` names are not checked")
EXTRA_RE = re.compile(r"every run with `([^`]*)`")
BATCH_RE = re.compile(r"every network at batch (\d+)")  # BATCH other than the default 2
# tools/sanitize_gpu.sh's line under its table: the host's memory over all of that table's runs.
HOST_MEM_RE = re.compile(r"^- host memory while the runs went.*lowest available (\d+) MiB, "
                         r"largest process (\d+) MiB")


def expected_cells():
    """The (network, precision, mode, tool) cells issue 10 asks for, in the matrix's order."""
    cells = []
    for net in TRAINED + INFER_ONLY:
        for p in PRECISIONS:
            for mode in MODES if net in TRAINED else ("infer",):
                for tool in TOOLS:
                    cells.append((net, p, mode, tool))
    return cells


def split_cells(line):
    """A markdown table line's cells: outer pipes dropped, split on unescaped pipes."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", s)]


def header_columns(cells):
    """{canonical name: index} for a sanitizer table's header row, or None for any other row."""
    names = [c.lower() for c in cells]
    cols = {}
    for i, n in enumerate(names):
        if n in REQUIRED:
            cols[n] = i
        elif "unchecked" in n:
            cols["unchecked"] = i
        elif n == "s":
            cols["seconds"] = i
        elif n.startswith("first error"):
            cols["first"] = i
    return cols if all(k in cols for k in REQUIRED) else None


def is_separator(cells):
    return bool(cells) and all(re.fullmatch(r":?-{3,}:?", c) for c in cells)


def count(text):
    """A count cell: an int, None for '?' or a dash, ValueError for anything else."""
    if text in BLANK or text == "?":
        return None
    return int(text)


def read_log(path):
    """What a sanitizer log says: {"errors": the summary's count or None, "races": [the two
    kernels of each race reported, in order], "header": the repro's first line or None}."""
    info = {"errors": None, "races": [], "header": None}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    pending = None
    for line in lines:
        m = RACE_RE.search(line)
        if m:
            pending = m.group(1)
            info["races"].append((pending, None))
            continue
        m = RACE_AND_RE.search(line)
        if m and pending is not None:
            info["races"][-1] = (pending, m.group(1))
            pending = None
            continue
        m = RACE_SUMMARY_RE.search(line) or ERROR_SUMMARY_RE.search(line)
        if m:
            info["errors"] = int(m.group(1))
        if info["header"] is None and REPRO_RE.match(line.strip()):
            info["header"] = line.strip()
    return info


def is_vendor(kernel):
    return kernel is not None and bool(VENDOR_RE.match(kernel)) and "cnnbench" not in kernel


def natural_key(path):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


class Row:
    def __init__(self, **kw):
        self.__dict__.update(kw)

    @property
    def where(self):
        return f"{self.path}:{self.line}"


def parse_file(path, rel, warn):
    """The sanitizer rows of one markdown file (a list of Row); malformed rows go to warn()."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    rows = []
    kernel_filter = extra = batch = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FILTER_RE.search(line)
        if m and line.lstrip().startswith("-"):
            kernel_filter = m.group(1)
        m = EXCLUDE_RE.search(line)
        if m and line.lstrip().startswith("-"):  # every kernel but these: "!" marks an exclusion
            kernel_filter = "!" + m.group(1)
        m = EXTRA_RE.search(line)
        if m and line.lstrip().startswith("-"):
            extra = m.group(1)
        m = BATCH_RE.search(line)
        if m and line.lstrip().startswith("-"):
            batch = int(m.group(1))
        cols = header_columns(split_cells(line)) if line.lstrip().startswith("|") else None
        if cols is None or i + 1 >= len(lines) or not is_separator(split_cells(lines[i + 1])):
            i += 1
            continue
        width = len(split_cells(line))
        i += 2
        while i < len(lines) and lines[i].lstrip().startswith("|"):
            cells = split_cells(lines[i])
            where = f"{rel}:{i + 1}"
            if len(cells) != width:
                warn(f"{where}: {len(cells)} cells where the header has {width}; row skipped")
                i += 1
                continue
            def get(key, cells=cells):
                return cells[cols[key]] if key in cols else ""
            try:
                errors = count(get("errors"))
                unchecked = count(get("unchecked")) if "unchecked" in cols else None
                exit_status = count(get("exit"))
                seconds = count(get("seconds")) if "seconds" in cols else None
            except ValueError:
                warn(f"{where}: errors, unchecked launches or exit is not a count; row skipped")
                i += 1
                continue
            log = None
            if os.path.basename(path) == "summary.md":
                name = "_".join((get("network"), get("precision"), get("mode"), get("tool")))
                log = read_log(os.path.join(os.path.dirname(path), name + ".log"))
            errors_text = get("errors")
            if errors is None and log and log["errors"] is not None and get("tool") == "racecheck":
                errors, errors_text = log["errors"], f"{log['errors']} (from its log)"
            rows.append(Row(path=rel, line=i + 1, network=get("network"),
                            precision=get("precision"), mode=get("mode"), tool=get("tool"),
                            errors=errors, errors_text=errors_text, unchecked=unchecked,
                            counts_unchecked="unchecked" in cols, exit=exit_status,
                            exit_text=get("exit"), seconds=seconds, first=get("first"),
                            kernel_filter=kernel_filter, extra=extra, batch=batch, log=log))
            i += 1
        kernel_filter = extra = batch = None  # a table's bullets come before it: none carry on
    host_mem = None  # the summary's host memory line, after its table: for runs killed by a signal
    for line in lines:
        m = HOST_MEM_RE.match(line.strip())
        if m:
            host_mem = (int(m.group(1)), int(m.group(2)))
    for r in rows:
        r.host_mem = host_mem
    return rows


def repro_log(path):
    """read_log(path) where the log is tools/racecheck_torch_repro.py's (its header line in the
    first 2 KB), else None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(2048)
    except OSError:
        return None
    if not any(REPRO_RE.match(x.strip()) for x in head.splitlines()):
        return None
    return read_log(path)


def scan(root, skip, warn, repros=None):
    rows = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".log") and repros is not None:
                path = os.path.join(dirpath, name)
                info = repro_log(path)
                if info is not None:
                    repros.append((os.path.relpath(path, root).replace(os.sep, "/"), info))
                continue
            if not name.endswith(".md"):
                continue
            path = os.path.join(dirpath, name)
            if skip and os.path.realpath(path) == skip:
                continue
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            try:
                rows.extend(parse_file(path, rel, warn))
            except OSError as e:
                warn(f"{rel}: cannot read ({e.strerror}); skipped")
    return rows


def classify(r):
    """(status, rank among its status, detail) of one row."""
    first = "" if r.first in BLANK else r.first
    if first.startswith("(") and first.endswith(")") and first.count("(") == 1:
        first = first[1:-1]  # the script's own notes: "(timed out after 300 s)"
    low = first.lower()
    errs = f"{r.errors_text} errors" if r.errors_text not in BLANK else "no error count"
    if "not run" in low or (r.errors is None and r.exit is None):
        return INCOMPLETE, NOTHING, first or "not run"
    if r.exit == 124 or "timed out" in low:
        return INCOMPLETE, TIMED_OUT, first or f"timed out (exit {r.exit_text})"
    if "overflow" in low:
        note = re.sub(r"^[–-] \((.*)\)$", r"\1", first)
        return INCOMPLETE, OVERFLOW, f"{errs}, exit {r.exit_text}: {note}"
    unchecked = r.unchecked or 0
    vendor = vendor_kernels(r)
    if vendor:
        shown = ", ".join(f"`{k}`" for k in vendor[:3])
        more = f" and {len(vendor) - 3} more" if len(vendor) > 3 else ""
        return VENDOR, r.errors, (f"{r.errors} races, every one between accesses of vendor "
                                  f"kernels: {shown}{more}")
    cut_vendor = vendor_race_kernels(r) if r.exit else []
    if cut_vendor:
        # A run that ended early (killed, exit 9) is no verdict on the kernels it never reached,
        # and the races it reported are the vendors' alone: incomplete, not a finding of ours.
        shown = ", ".join(f"`{k}`" for k in cut_vendor[:3])
        more = f" and {len(cut_vendor) - 3} more" if len(cut_vendor) > 3 else ""
        detail = (f"exit {r.exit_text} before its end; the {r.errors} race(s) it had reported, "
                  f"every one between accesses of vendor kernels: {shown}{more}")
        return INCOMPLETE, FAILED, detail + host_mem_note(r, "")
    if r.errors is not None and r.errors > unchecked:
        detail = f"{r.errors - unchecked} errors"
        if unchecked:
            detail += f" (and {unchecked} unchecked launches)"
        if not r.counts_unchecked:
            detail += " (this table does not count unchecked launches apart)"
        if r.exit:
            detail += f", exit {r.exit_text}"
        return FINDINGS, r.errors - unchecked, detail + (f": {first}" if first else "")
    if r.errors == 0 and unchecked == 0 and r.exit == 0:
        return CLEAN, 0, ""
    if r.errors is None:
        return INCOMPLETE, FAILED, f"no error count ('?'), exit {r.exit_text}" + (
            f": {first}" if first else "")
    if r.exit:
        what = "out of memory" if "out of memory" in low else f"exit {r.exit_text}"
        detail = f"{what}, {errs}" + (f" ({unchecked} launches unchecked)" if unchecked else "")
        detail += f": {first}" if first else ""
        return INCOMPLETE, FAILED, detail + host_mem_note(r, low)
    return INCOMPLETE, UNCHECKED, f"{unchecked} launches unchecked (of {r.errors} errors counted)"


def host_mem_note(r, first):
    """For a run killed by a signal (9, or 137 through timeout) whose first-error text does not
    say the host's memory while it ran (older tables): the table's own line, over all its runs."""
    host_mem = getattr(r, "host_mem", None)
    if r.exit not in (9, 137) or not host_mem or "as little as" in first:
        return ""
    return (f"; over that table's runs the host had as little as {host_mem[0]:,} MiB available "
            f"(largest process {host_mem[1]:,} MiB)")


def vendor_kernels(r):
    """The vendor kernels, sorted, of a racecheck row whose log shows every error it counted as a
    race between vendor kernels' accesses; [] otherwise (no log, errors not all shown, one of ours
    in a race, unchecked launches, a failed exit)."""
    if r.unchecked or r.exit:
        return []
    return vendor_race_kernels(r)


def vendor_race_kernels(r):
    """vendor_kernels(r) whatever the run's exit and unchecked launches: the races a run cut short
    (killed for the host's memory) had reported before it ended."""
    log = getattr(r, "log", None)
    if r.tool != "racecheck" or not log or not r.errors:
        return []
    races = log["races"]
    if len(races) < r.errors:
        return []  # some counted errors are not shown: their kernels are unknown
    names = {k for pair in races for k in pair}
    if not all(is_vendor(k) for k in names):
        return []
    return sorted(names)


def qualifiers(r):
    q = []
    if r.kernel_filter and r.kernel_filter.startswith("!"):
        q.append(f"the kernels `{r.kernel_filter[1:]}` names unchecked")
    elif r.kernel_filter:
        q.append(f"checked only the kernels `{r.kernel_filter}` names")
    if r.extra:
        q.append(f"with `{r.extra}`")
    if getattr(r, "batch", None):
        q.append(f"at batch {r.batch}")
    return "; ".join(q)


def best(rows):
    """The row a cell shows: by status (CLEAN first), a run that started before one that did
    not, a run over every kernel before one under a kernel filter, how far it got (of timed-out
    runs, the longest), fewest unchecked launches, a table that counts them apart (the newer
    layout), the later file."""
    def key(r):
        status, rank, _ = classify(r)
        started = not (status == INCOMPLETE and rank == NOTHING)
        ran_for = (r.seconds or 0) if rank == TIMED_OUT and status == INCOMPLETE else 0
        return (STATUS_ORDER[status], started, not r.kernel_filter, rank, ran_for,
                -(r.unchecked or 0), r.counts_unchecked, natural_key(r.path), r.line)
    return max(rows, key=key)


def cell_table(keys, by_cell):
    out = ["| network | precision | mode | status | detail | source | rows |",
           "|---|---|---|---|---|---|---|"]
    for net, p, mode, tool in keys:
        rows = by_cell.get((net, p, mode, tool), [])
        if not rows:
            out.append(f"| {net} | {p} | {mode} | {NOT_RUN} | – | – | 0 |")
            continue
        r = best(rows)
        status, _, detail = classify(r)
        detail = "; ".join(x for x in (detail, qualifiers(r)) if x) or "–"
        seen = [classify(x)[0] for x in rows]
        by_status = ", ".join(f"{seen.count(s)} {s.lower()}"
                              for s in (CLEAN, VENDOR, FINDINGS, INCOMPLETE) if s in seen)
        out.append(f"| {net} | {p} | {mode} | {status} | {md(detail)} | {r.where} | "
                   f"{len(rows)} ({by_status}) |")
    return out


def md(text):
    return text.replace("|", "\\|")


def tally(keys, by_cell):
    t = {CLEAN: 0, VENDOR: 0, FINDINGS: 0, INCOMPLETE: 0, NOT_RUN: 0, "filtered": 0}
    for k in keys:
        rows = by_cell.get(k)
        if not rows:
            t[NOT_RUN] += 1
            continue
        r = best(rows)
        status = classify(r)[0]
        t[status] += 1
        if status == CLEAN and r.kernel_filter:
            t["filtered"] += 1
    return t


def totals_line(t, n):
    clean = f"{t[CLEAN]} clean"
    if t["filtered"]:
        clean += f" ({t['filtered']} of them under a kernel filter)"
    vendor = f"{t[VENDOR]} with races in vendor kernels alone, " if t[VENDOR] else ""
    return (f"{clean}, {vendor}{t[FINDINGS]} findings, {t[INCOMPLETE]} incomplete, "
            f"{t[NOT_RUN]} not run of {n} expected")


def repro_section(repros):
    """The PyTorch-alone racecheck logs that report races, a line each."""
    out = ["## The vendors' kernels without cnnbench (tools/racecheck_torch_repro.py)", ""]
    hits = [(p, i) for p, i in repros if i["races"]]
    if not hits:
        return out + ["No log of it under the root reports a race.", ""]
    out += ["Races racecheck reports in cuDNN's and cuBLAS's kernels run through PyTorch, with no "
            "cnnbench code in the process:", "",
            "| log | run | races | errors counted | kernels |", "|---|---|---:|---:|---|"]
    for path, info in sorted(hits, key=lambda x: natural_key(x[0])):
        names = sorted({k for pair in info["races"] for k in pair if k})
        errors = "?" if info["errors"] is None else str(info["errors"])
        out.append(f"| {path} | {md(info['header'])} | {len(info['races'])} | {errors} | "
                   + ", ".join(f"`{k}`" for k in names) + " |")
    return out + [""]


def report(rows, root_label, repros=None):
    expected = expected_cells()
    exp_set = set(expected)
    units = [r for r in rows if r.network == "test_gpu" or r.mode == "tests"]
    cells = [r for r in rows if not (r.network == "test_gpu" or r.mode == "tests")]
    by_cell = {}
    for r in cells:
        by_cell.setdefault((r.network, r.precision, r.mode, r.tool), []).append(r)
    files = len({r.path for r in rows})
    t = tally(expected, by_cell)
    out = ["# compute-sanitizer coverage (issue 10)", "",
           f"Written by `tools/sanitizer_matrix.py` from {len(rows)} rows of {files} sanitizer "
           f"tables under `{root_label}/` (tools/sanitize_gpu.sh's summary.md files and copies "
           "of them); sources are relative to it. Do not edit: run the tool again.", "",
           "Expected: " + ", ".join(TRAINED) + " in inference and training, and "
           + ", ".join(INFER_ONLY) + " in inference (they have no training step); fp16 and "
           "fp32; under " + ", ".join(TOOLS) + ".", "",
           "A cell is CLEAN if any run of it counted 0 errors, 0 unchecked launches and exit 0; "
           "else FINDINGS if a run counted errors beyond the launches the tool left unchecked "
           "and not all in vendor kernels; "
           "else VENDOR if racecheck's log shows every error it counted as a race between "
           "accesses of vendor kernels (cuBLAS, cuDNN, CUTLASS), none of ours; "
           "else INCOMPLETE (the run that got furthest is shown); NOT RUN where no row names it. "
           "\"rows\" counts every run of the cell by its own status.", "",
           f"**Totals: {totals_line(t, len(expected))}.**", ""]
    for tool in TOOLS:
        keys = [k for k in expected if k[3] == tool]
        out += [f"## {tool}: {totals_line(tally(keys, by_cell), len(keys))}", ""]
        out += cell_table(keys, by_cell) + [""]
    extra = sorted((k for k in by_cell if k not in exp_set), key=lambda k: tuple(
        natural_key(x) for x in k))
    if extra:
        out += ["## Rows outside the expected matrix", ""]
        for tool in sorted({k[3] for k in extra}):
            out += [f"{tool}:", ""] + cell_table([k for k in extra if k[3] == tool], by_cell)
            out += [""]
    if repros is not None:
        out += repro_section(repros)
    out += ["## Unit tests (test_gpu, one row a run; the test is the summary's folder)", ""]
    if not units:
        out += ["None.", ""]
    else:
        out += ["| test | tool | status | errors | unchecked | exit | detail | source |",
                "|---|---|---|---:|---:|---:|---|---|"]
        for r in sorted(units, key=lambda r: (unit_name(r), r.tool, natural_key(r.path), r.line)):
            status, _, detail = classify(r)
            detail = "; ".join(x for x in (detail, qualifiers(r)) if x) or "–"
            unchecked = "–" if r.unchecked is None else str(r.unchecked)
            out.append(f"| {unit_name(r)} | {r.tool} | {status} | {r.errors_text or '–'} | "
                       f"{unchecked} | {r.exit_text or '–'} | {md(detail)} | {r.where} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def unit_name(r):
    parts = r.path.split("/")
    if parts[-1] == "summary.md" and len(parts) > 1:
        return parts[-2]
    return parts[-1][:-3] if parts[-1].endswith(".md") else parts[-1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="results", help="the tree to scan (default results)")
    ap.add_argument("--out", help="write the markdown here instead of stdout")
    a = ap.parse_args(argv)
    if not os.path.isdir(a.root):
        print(f"sanitizer_matrix.py: --root {a.root}: not a directory", file=sys.stderr)
        return 2
    skip = os.path.realpath(a.out) if a.out else None
    def warn(msg):
        print(f"sanitizer_matrix.py: {msg}", file=sys.stderr)
    repros = []
    rows = scan(a.root, skip, warn, repros)
    text = report(rows, os.path.basename(os.path.normpath(a.root)) or a.root, repros)
    if not a.out:
        sys.stdout.write(text)
        return 0
    try:
        with open(a.out, "w") as f:
            f.write(text)
    except OSError as e:
        print(f"sanitizer_matrix.py: {a.out}: cannot write ({e.strerror})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
