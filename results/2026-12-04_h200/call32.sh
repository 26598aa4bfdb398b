#!/usr/bin/env bash
# Device call 32, the session's last: ConvBackwardOp::prepare no longer copies each output to the
# host and back where nothing runs (a search's probes). ResNet-50 training at 8 GiB again (its
# answer must stay 172, in less time), then at 80 GiB and on the whole device (cut off in call
# 31), and the article's EfficientNet-B0 case at 48 GiB (cut off at >= 17,561).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/s
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
R=results/2026-12-04_h200
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
SIZES="8" LIMIT_S=40 CAP=32768 bash tools/max_batch_sweep.sh configs/max_batch.yaml $O/s8 2>&1 | grep max_batch_sweep
echo "S8 $(date +%T)"; grep "resnet50/fp16/train" $O/s8/max_batch_8.log | cut -c1-200
SIZES="80" LIMIT_S=70 CAP=32768 bash tools/max_batch_sweep.sh $R/max_batch_large_r50.yaml $O/s 2>&1 | grep max_batch_sweep
echo "S80 $(date +%T)"
SIZES="whole" LIMIT_S=120 CAP=32768 bash tools/max_batch_sweep.sh $R/max_batch_large_r50.yaml $O/s 2>&1 | grep max_batch_sweep
echo "Swhole $(date +%T)"
mkdir -p $O/b && SIZES="48" LIMIT_S=100 CAP=32768 bash tools/max_batch_sweep.sh $R/max_batch_large_b0.yaml $O/b 2>&1 | tail -8
echo "S48 $(date +%T)"
grep -h "max batch" $O/s/*.log $O/b/*.log | cut -c1-200
(cd $O && tar czf s.tgz --remove-files s s8 b)
