#!/usr/bin/env bash
# Device call 73 (written 2026-12-05 evening): why the stem rows kernel is 2x slower than the tile
# kernel (call 68: 1,896 against 923 us at ResNet-50 fp16 batch 256, H100). Nsight Compute, full
# set, on one launch of each kernel while cnnbench_infer's autotune races them
# (CNNBENCH_STEM_ROWS=1). Read: duration, achieved occupancy, the tensor pipe's utilisation,
# shared-memory bank conflicts (l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld), DRAM bytes,
# warp stall reasons. Predictions: the rows kernel is bound by shared-memory loads (A and B
# fragments loaded per mma.sync m16n8k8: 10 loads per 16 mma), not by DRAM; the tile kernel by
# its gather. First the race itself again (call 68's step S), since the rows kernel's fill was
# rewritten after call 68 (contiguous per row, no division per element; untested on a GPU then):
# predicted 600 to 1,200 us at 256 (1,896 before) if the fill was half its time.
# Pack cnnbench_infer and cnnbench; carry .carry.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/n
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
CNNBENCH_STEM_ROWS=1 timeout 150 build/release/cnnbench --config=configs/issue9_targets.yaml \
  --benchmark_filter='resnet50/fp16/graph/batch:(32|256)/' --benchmark_out=$O/n/race.json \
  --layers_out=$O/n/race.layers.json >$O/n/race.log 2>&1
echo "race rc=$?"; grep -E "ERROR|_median" $O/n/race.log | cut -c1-120
python3 -c "import json,sys; [print(m['model'], l['engine'], round(l['tuned_us'],1), l['engine_notes'][:160]) for m in json.load(open(sys.argv[1]))['models'] for l in m['layers'][:1]]" \
  $O/n/race.layers.json 2>&1 | head -4
for k in stem_kernel stem_rows_kernel; do
  CNNBENCH_STEM_ROWS=1 timeout 240 $NCU --set full -k "regex:^${k}" -c 1 -o $O/n/$k \
    build/release/cnnbench_infer --network=resnet50 --precision=fp16 --batch=256 --engine=autotune \
    --stem=cnnbench --output=/tmp/logits.safetensors >$O/n/$k.log 2>&1
  echo "$k rc=$?"
  $NCU --import $O/n/$k.ncu-rep --page details --csv >$O/n/$k.csv 2>/dev/null
  grep -E '"Duration"|"Achieved Occupancy"|"Registers Per Thread"|"Compute \(SM\) Throughput"|"Memory Throughput"|"DRAM Throughput"|Shared Memory Configuration Size' $O/n/$k.csv | cut -d, -f5- | head -12
done
(cd $O && tar czf n.tgz --remove-files n)
