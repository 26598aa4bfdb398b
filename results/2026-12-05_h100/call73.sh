#!/usr/bin/env bash
# Device call 73 (written 2026-12-05 evening): why the stem rows kernel is 2x slower than the tile
# kernel (call 68: 1,896 against 923 us at ResNet-50 fp16 batch 256, H100). Nsight Compute, full
# set, on one launch of each kernel while cnnbench_infer's autotune races them
# (CNNBENCH_STEM_ROWS=1). Read: duration, achieved occupancy, the tensor pipe's utilisation,
# shared-memory bank conflicts (l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld), DRAM bytes,
# warp stall reasons. Predictions: the rows kernel is bound by shared-memory loads (A and B
# fragments loaded per mma.sync m16n8k8: 10 loads per 16 mma), not by DRAM; the tile kernel by
# its gather. Pack cnnbench_infer; carry .carry.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/n
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for k in stem_kernel stem_rows_kernel; do
  CNNBENCH_STEM_ROWS=1 timeout 240 $NCU --set full -k "regex:^${k}" -c 1 -o $O/n/$k \
    build/release/cnnbench_infer --network=resnet50 --precision=fp16 --batch=256 --engine=autotune \
    --stem=cnnbench --output=/tmp/logits.safetensors >$O/n/$k.log 2>&1
  echo "$k rc=$?"
  $NCU --import $O/n/$k.ncu-rep --page details --csv >$O/n/$k.csv 2>/dev/null
  grep -E '"Duration"|"Achieved Occupancy"|"Registers Per Thread"|"Compute \(SM\) Throughput"|"Memory Throughput"|"DRAM Throughput"|Shared Memory Configuration Size' $O/n/$k.csv | cut -d, -f5- | head -12
done
(cd $O && tar czf n.tgz --remove-files n)
