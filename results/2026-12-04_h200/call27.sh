#!/usr/bin/env bash
# Device call 27 (about 500 s).
# A: the synthetic input now written on the device (kernels/synthetic.cu): bit for bit the host's
#    (GpuKernels.SyntheticInput...), then GpuMemory and the network suite on it.
# M: issue 5's card table, the rest: configs/max_batch.yaml under 16, 24, 32, 48 and 80 GiB and the
#    whole device, each size stopped after 68 s at most (cut-off searches keep their bracket).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/m
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
timeout 100 $B/tests/test_gpu --gtest_filter='GpuKernels.Synthetic*:GpuMemory.*:GpuNetwork.*' >$O/a/gpu.log 2>&1
echo "A rc=$? $(date +%T) $(grep -E '^\[  (PASSED|FAILED) |FAILED  \]' $O/a/gpu.log | head -6 | tr '\n' ' ')"
(cd $O && tar czf a.tgz --remove-files a)
SIZES="16 24 32 48 80 whole" LIMIT_S=68 bash tools/max_batch_sweep.sh configs/max_batch.yaml $O/m 2>&1 | tail -7
date +%T
cat $O/m/max_batch.md
rm -f $O/m/*.layers.json
(cd $O && tar czf m.tgz --remove-files m)
