#!/usr/bin/env bash
# Device call 33: the one batch call 32's whole-device ResNet-50 training search did not reach.
set -u
O=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
mkdir -p $O/w
SIZES="whole" LIMIT_S=75 CAP=3483 bash tools/max_batch_sweep.sh results/2026-12-04_h200/max_batch_whole_3483.yaml $O/w 2>&1 | grep max_batch_sweep
grep -h "max batch" $O/w/*.log | cut -c1-200
(cd $O && tar czf w.tgz --remove-files w)
