#!/usr/bin/env python3
"""ncu's per-kernel metrics summed by kernel: where a step's time goes inside an op.

    python3 tools/ncu_kernel_table.py NCU.csv [--by-grid] [--out-md FILE]

NCU.csv is what `LC_ALL=C ncu --csv --page raw --print-units base --metrics gpu__time_duration.sum,dram__bytes_read.sum,
dram__bytes_write.sum[,launch__grid_size,launch__registers_per_thread,
sm__warps_active.avg.pct_of_peak_sustained_active] APP` printed to stdout: the application's own
output and ncu's ==PROF== lines may come before and between its rows; the table starts at the
header row (its first cell is "ID"), then a row of units, then one row per profiled kernel.

One row per kernel function (the name without its namespaces, template arguments and parameters:
bn_grad_sums_vec), or with --by-grid per function and grid size (a shape's launches together):
launches, total and mean microseconds, DRAM megabytes read and written, the achieved DRAM GB/s
(bytes over time), registers per thread and the mean achieved occupancy (% of the warps an SM can
hold). Ordered by total time; a last row sums them. A file without the header row, a missing time
column or a unit it does not know exits 2 with one line naming the problem.
"""
import argparse
import csv
import io
import sys

TIME = "gpu__time_duration.sum"
READ = "dram__bytes_read.sum"
WRITE = "dram__bytes_write.sum"
GRID = "launch__grid_size"
REGS = "launch__registers_per_thread"
OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"

TIME_UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
              "second": 1e6, "s": 1e6}
BYTE_UNITS = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6,
              "GB": 1e9, "Kibyte": 1024.0, "Mibyte": 1024.0**2, "Gibyte": 1024.0**3}


class InputError(Exception):
    pass


def short_name(full):
    """'void cnnbench::(anonymous namespace)::bn_stats_vec<__half, 8>(const T1 *, ...)' ->
    'bn_stats_vec'."""
    s = full.strip()
    depth, out = 0, []
    for ch in s:  # drop template arguments and parameter lists, nested or not
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = "".join(out).split()
    s = s[-1] if s else full
    return s.split("::")[-1] or full


def number(cell):
    cell = cell.strip().replace(",", "")
    if cell in ("", "n/a", "N/A"):
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def read_rows(path):
    try:
        with open(path, newline="") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})")
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID",')), None)
    if start is None:
        raise InputError(f"{path}: no ncu table (no header row starting with \"ID\"; was it "
                         "ncu --csv --page raw?)")
    # Only the table's own lines: quoted CSV rows (the application may print between them).
    body = [l for l in lines[start:] if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(body))))
    header, units, data = rows[0], rows[1] if len(rows) > 1 else [], rows[2:]
    if TIME not in header:
        raise InputError(f"{path}: no {TIME} column (add it to ncu's --metrics)")
    if "Kernel Name" not in header:
        raise InputError(f"{path}: no \"Kernel Name\" column")
    col = {name: i for i, name in enumerate(header)}

    def scale(metric, table):
        if metric not in col:
            return None
        unit = units[col[metric]] if col[metric] < len(units) else ""
        if unit not in table:
            raise InputError(f"{path}: {metric} in unit '{unit}', which this tool does not know")
        return table[unit]

    ts, rs, ws = scale(TIME, TIME_UNITS), scale(READ, BYTE_UNITS), scale(WRITE, BYTE_UNITS)
    out = []
    for r in data:
        if len(r) < len(header):
            continue
        get = lambda m: number(r[col[m]]) if m in col else None  # noqa: E731
        t = get(TIME)
        if t is None:
            continue
        rd, wr = get(READ), get(WRITE)
        out.append({"name": short_name(r[col["Kernel Name"]]), "us": t * ts,
                    "read": rd * rs if rd is not None else None,
                    "write": wr * ws if wr is not None else None,
                    "grid": r[col[GRID]].strip() if GRID in col else (
                        r[col["Grid Size"]].strip() if "Grid Size" in col else ""),
                    "regs": get(REGS), "occ": get(OCC)})
    if not out:
        raise InputError(f"{path}: the ncu table has no kernel rows")
    return out


def table(rows, by_grid):
    groups = {}
    for r in rows:
        key = (r["name"], r["grid"]) if by_grid else (r["name"],)
        g = groups.setdefault(key, {"n": 0, "us": 0.0, "read": 0.0, "write": 0.0, "bytes": True,
                                    "regs": set(), "occ": []})
        g["n"] += 1
        g["us"] += r["us"]
        if r["read"] is None or r["write"] is None:
            g["bytes"] = False
        else:
            g["read"] += r["read"]
            g["write"] += r["write"]
        if r["regs"] is not None:
            g["regs"].add(int(r["regs"]))
        if r["occ"] is not None:
            g["occ"].append(r["occ"])
    head = ["kernel"] + (["grid"] if by_grid else []) + [
        "launches", "us", "us each", "MB read", "MB written", "GB/s", "registers", "occupancy %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    # The total's bytes and GB/s only where every launch's bytes are known ("-" otherwise).
    total = {"n": 0, "us": 0.0, "read": 0.0, "write": 0.0, "bytes": True}
    for key, g in sorted(groups.items(), key=lambda kv: -kv[1]["us"]):
        total["n"] += g["n"]
        total["us"] += g["us"]
        total["read"] += g["read"]
        total["write"] += g["write"]
        total["bytes"] = total["bytes"] and g["bytes"]
        gbs = (g["read"] + g["write"]) / (g["us"] * 1e3) if g["bytes"] and g["us"] > 0 else None
        regs = "/".join(str(x) for x in sorted(g["regs"])) or "-"
        occ = f"{sum(g['occ']) / len(g['occ']):.0f}" if g["occ"] else "-"
        cells = list(key) + [str(g["n"]), f"{g['us']:,.1f}", f"{g['us'] / g['n']:,.2f}",
                             f"{g['read'] / 1e6:,.1f}" if g["bytes"] else "-",
                             f"{g['write'] / 1e6:,.1f}" if g["bytes"] else "-",
                             f"{gbs:,.0f}" if gbs is not None else "-", regs, occ]
        lines.append("| " + " | ".join(cells) + " |")
    known = total["bytes"] and total["us"] > 0
    cells = [f"{total['read'] / 1e6:,.1f}", f"{total['write'] / 1e6:,.1f}",
             f"{(total['read'] + total['write']) / (total['us'] * 1e3):,.0f}"] if known else \
        ["-", "-", "-"]
    lines.append("| all" + (" | " if by_grid else "") + f" | {total['n']} | {total['us']:,.1f} | | "
                 + " | ".join(cells) + " | | |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--by-grid", action="store_true", help="a row per kernel and grid size")
    ap.add_argument("--out-md", help="also write the table to this file")
    a = ap.parse_args(argv)
    try:
        md = table(read_rows(a.csv), a.by_grid)
    except InputError as e:
        print(f"ncu_kernel_table.py: {e}", file=sys.stderr)
        return 2
    print(md)
    if a.out_md:
        try:
            with open(a.out_md, "w") as f:
                f.write(md + "\n")
        except OSError as e:
            print(f"ncu_kernel_table.py: {a.out_md}: cannot write ({e.strerror})", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
