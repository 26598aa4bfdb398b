#!/usr/bin/env bash
# Device call 125 (written 2026-12-06 09:25 UTC, not yet run): why the stem's two ring kernels run
# 5 to 8x slower than their bytes and FLOPs allow. Carry .carry. About 150 s.
# Call 116: the weight gradient's second form 1,332.9 us (cuDNN 877.2) at 396 blocks x 72 tiles:
# 18 us a tile, 32K cycles, where its 336 mma.sync m16n8k8 a warp a tile, its ldmatrix and
# shared loads, and 14 KB of dy a tile (cp.async, one tile ahead) account for 2 to 4K. Call 117:
# the rows kernel 1,220 us against the tile kernel's 892. ncu's duration, bytes and warps active
# (19% and 24%) did not say what the warps wait on. This call asks for the stall reasons, per
# kernel and per SASS instruction.
# P: ncu --set full with source counters, one launch each: stem_wgrad_kernel in the training step
#    at 256 (CNNBENCH_STEM_WGRAD=1), stem_rows_kernel in inference at 256 (CNNBENCH_STEM_ROWS=1,
#    the race times it). Reports (.ncu-rep) and text: the details page, and the source page as
#    SASS with its per-instruction stall samples (warp_state sampling), the top 40 by samples.
# S: the SASS of both kernels (cuobjdump, if the device has it) for reading offline.
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-300}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
mkdir -p $O/p
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$NCU --version | tail -1
CNNBENCH_STEM_WGRAD=1 LC_ALL=C timeout $(lim 120) $NCU --set full --import-source no \
  -k "regex:stem_wgrad_kernel" -c 1 -f -o $O/p/wgrad \
  $B/cnnbench_train_step --network=resnet50 --precision=fp16 --batch=256 --stem=cnnbench \
  --breakdown=/tmp/c125.json >$O/p/wgrad.log 2>&1
echo "P wgrad rc=$? ${SECONDS}s"; tail -2 $O/p/wgrad.log
CNNBENCH_STEM_ROWS=1 LC_ALL=C timeout $(lim 120) $NCU --set full --import-source no \
  -k "regex:stem_rows_kernel" -c 1 -f -o $O/p/rows \
  $B/cnnbench_infer --network=resnet50 --precision=fp16 --batch=256 --engine=autotune \
  --stem=auto --output=/tmp/c125.safetensors >$O/p/rows.log 2>&1
echo "P rows rc=$? ${SECONDS}s"; tail -2 $O/p/rows.log
for k in wgrad rows; do
  [ -f $O/p/$k.ncu-rep ] || continue
  $NCU --import $O/p/$k.ncu-rep --page details >$O/p/$k.details.txt 2>&1
  $NCU --import $O/p/$k.ncu-rep --page source --csv --print-source sass >$O/p/$k.sass.csv 2>$O/p/$k.sass.err
  echo "$k source page rc=$?"
  grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Stall|Warp Cycles Per Issued|L1/TEX Hit|Shared|Bank" \
    $O/p/$k.details.txt | head -40
done
python3 - $O/p <<'PY' 2>&1 | head -100
import csv, sys, os
for k in ("wgrad", "rows"):
    p = os.path.join(sys.argv[1], k + ".sass.csv")
    if not os.path.exists(p):
        continue
    rows = list(csv.reader(open(p, errors="replace")))
    head = next((i for i, r in enumerate(rows) if any("Source" == c for c in r)), None)
    if head is None:
        print(k, "no header"); continue
    h = rows[head]
    src = h.index("Source")
    cols = [i for i, c in enumerate(h) if "Sampling" in c and "All" in c] or \
           [i for i, c in enumerate(h) if "Sampling" in c]
    if not cols:
        print(k, "columns:", h[:30]); continue
    c = cols[0]
    def num(x):
        try: return float(x.replace(",", ""))
        except ValueError: return 0.0
    body = [r for r in rows[head + 1:] if len(r) > c]
    total = sum(num(r[c]) for r in body) or 1
    print(f"== {k}: {len(body)} SASS lines, column '{h[c]}', {total:.0f} samples")
    for r in sorted(body, key=lambda r: -num(r[c]))[:40]:
        print(f"{100 * num(r[c]) / total:5.1f}%  {r[src][:110]}")
PY
if command -v cuobjdump >/dev/null || [ -x /usr/local/cuda/bin/cuobjdump ]; then
  CU=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  $CU -sass -fun stem_wgrad_kernel $B/cnnbench_train_step >$O/p/wgrad.sass 2>&1
  $CU -sass -fun stem_rows_kernel $B/cnnbench_infer >$O/p/rows.sass 2>&1
  echo "S rc=$? $(wc -l <$O/p/wgrad.sass) and $(wc -l <$O/p/rows.sass) lines"
fi
(cd $O && tar czf p.tgz --remove-files p)
echo "call125 end ${SECONDS}s"
