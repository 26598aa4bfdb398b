#!/usr/bin/env bash
# Device call 25 (session of 2026-12-04, 13:26 UTC start; about 520 s).
# A: GpuMemory (the ballast now left out of the suite's device use).
# B: issue 5's check against the article with the guessing search: EfficientNet-B0 training at
#    64 px, 200 classes, fp16, Adam (configs/max_batch_article.yaml) under 8, 16, 24 and 48 GiB,
#    each size stopped after 75 s at most (a cut-off search keeps its bracket in the .jsonl).
# C: PyTorch's own largest batch for the same case (tools/pytorch_max_batch.py), fp16 and fp32,
#    under 8 GiB, 35 s a search.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/m $O/p
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
timeout 90 $B/tests/test_gpu --gtest_filter='GpuMemory.*' >$O/a/gpu_memory.log 2>&1
echo "A rc=$? $(date +%T) $(grep -E '^\[  (PASSED|FAILED) ' $O/a/gpu_memory.log | tr '\n' ' ')"
(cd $O && tar czf a.tgz --remove-files a)
SIZES="8 16 24 48" LIMIT_S=75 EXTRA=--max_batch_cap=32768 \
  bash tools/max_batch_sweep.sh configs/max_batch_article.yaml $O/m 2>&1 | tail -6
date +%T
grep -h "max batch" $O/m/max_batch_8.log | cut -c1-120 | head -12
cat $O/m/max_batch.md
rm -f $O/m/*.layers.json
(cd $O && tar czf m.tgz --remove-files m)
L=$((500 - SECONDS)); ((L > 100)) && L=100
PY=python3
PYTHONUNBUFFERED=1 timeout $L $PY tools/pytorch_max_batch.py --models efficientnet_b0 --tiny-imagenet \
  --precisions fp16,fp32 --memory-limit 8 --time-limit-s 35 --out $O/p/pytorch_max_batch.json \
  >$O/p/pytorch_max_batch.log 2>&1
echo "C rc=$? $(date +%T)"
tail -12 $O/p/pytorch_max_batch.log | cut -c1-160
(cd $O && tar czf p.tgz --remove-files p)
