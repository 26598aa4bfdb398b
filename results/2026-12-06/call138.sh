#!/usr/bin/env bash
# Device call 138 (written 2026-12-06 12:40 UTC, not yet run): the whole GPU suite, `ctest -L gpu`,
# at the current defaults, in two calls (PART=A, then PART=B), since no single call has finished
# it (call 131 cut test_gpu at 270 s; call 66 ran at -j2 and was cut at 570 s). Carry .carry.
# A (about 400 s at -j3): gpu_device_wide (RUN_SERIAL, alone), GpuOps_1 (359 s in call 66, the
#   long pole), GpuOps_0, GpuNetwork_0 and _1 (153, 121 s), GpuKernels, GpuTrain,
#   GpuTrainBackward, gpu_smoke_benchmark (132 s), gpu_faults.
# B (about 250 s at -j4): GpuZoo_0 to _3 (560 s together in call 65), GpuTrainStep_0 and _1,
#   GpuMbstd, GpuFourierBackward, GpuStyleganTrain, GpuFp8, GpuBnFusion, gpu_data_parallel.
# The CPU test gpu_filters_cover_every_test checks that every GPU test sits in one entry, and
# the two regexes below take every entry `ctest -N -L gpu` lists (checked on the CPU machine).
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-575}))
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
case ${PART:-A} in
  A) R='^gpu_(device_wide|GpuOps_[01]|GpuNetwork_[01]|GpuKernels|GpuTrain|GpuTrainBackward|smoke_benchmark|faults)$' J=3 ;;
  B) R='^gpu_(GpuZoo_[0-3]|GpuTrainStep_[01]|GpuMbstd|GpuFourierBackward|GpuStyleganTrain|GpuFp8|GpuBnFusion|data_parallel)$' J=4 ;;
  *) echo "PART takes A or B, not '${PART}'" >&2; exit 2 ;;
esac
mkdir -p $O/c
(cd $O && timeout $((END - SECONDS - 10)) ctest --test-dir $OLDPWD/$B -L gpu -R "$R" -j$J \
  --timeout 500 --output-on-failure --output-junit $O/c/junit_${PART:-A}.xml >c/ctest_${PART:-A}.log 2>&1)
echo "ctest ${PART:-A} rc=$? ${SECONDS}s"
grep -E "Test +#|tests passed|tests failed|Failed|Timeout|Not Run" $O/c/ctest_${PART:-A}.log | head -40
(cd $O && tar czf call138_${PART:-A}.tgz --remove-files c)
