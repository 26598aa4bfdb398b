#!/usr/bin/env bash
# Device call 31: issue 5's training searches on the large sizes, cap 32,768: ResNet-50 and the
# article's EfficientNet-B0 case at 48 GiB, ResNet-50 at 80 GiB and on the whole device.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/s
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
R=results/2026-12-04_h200
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
SIZES="48" LIMIT_S=170 CAP=32768 bash tools/max_batch_sweep.sh $R/max_batch_large_train.yaml $O/s 2>&1 | grep max_batch_sweep
echo "S48 $(date +%T)"
SIZES="80" LIMIT_S=120 CAP=32768 bash tools/max_batch_sweep.sh $R/max_batch_large_r50.yaml $O/s 2>&1 | grep max_batch_sweep
echo "S80 $(date +%T)"
SIZES="whole" LIMIT_S=220 CAP=32768 bash tools/max_batch_sweep.sh $R/max_batch_large_r50.yaml $O/s 2>&1 | tail -12
echo "Swhole $(date +%T)"
(cd $O && tar czf s.tgz --remove-files s)
