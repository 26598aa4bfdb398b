#!/usr/bin/env bash
# Device call 30: issue 5's table at 24 and 32 GiB, exact, with the searches' cap at 32,768 (the
# article's 24 and 48 GB EfficientNet cells lie above 8,192).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/s
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
SIZES="24" LIMIT_S=200 CAP=32768 bash tools/max_batch_sweep.sh configs/max_batch.yaml $O/s 2>&1 | grep max_batch_sweep
echo "S24 $(date +%T)"
SIZES="32" LIMIT_S=250 CAP=32768 bash tools/max_batch_sweep.sh configs/max_batch.yaml $O/s 2>&1 | tail -12
echo "S32 $(date +%T)"
(cd $O && tar czf s.tgz --remove-files s)
