#!/usr/bin/env bash
# One call on the GPU machine: GPU tests, the PyTorch cross-check, the sweep and the PyTorch
# peer baseline, all on the same card. Binaries come prebuilt in build/release (see README);
# libraries the machine lacks come in .carry/lib. Everything lands in $OUT.
#   bash tools/device_session.sh [steps...]   steps: tests crosscheck sweep peer versions
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=build/release
CUDNN919=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
steps=${*:-tests crosscheck sweep peer}
# On a crash, the host backtrace (cuda-gdb also debugs host code there).
backtrace() { timeout 120 cuda-gdb -batch -ex run -ex bt --args "$@" 2>&1 | grep -E "^#|signal|Error" | head -30; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used,memory.total --format=csv
for step in $steps; do
  echo "=== $step $(date +%T)"
  case $step in
    tests) # system cuDNN (9.14) and the PyTorch venv's (9.19)
      timeout ${TEST_TIMEOUT:-300} $B/tests/test_gpu 2>&1 | tee "$OUT/gpu_tests_cudnn914.log" | grep -vE "^\[ +(RUN|OK) " | tail -70
      [ "${PIPESTATUS[0]}" -ge 128 ] && backtrace $B/tests/test_gpu
      [ -n "${TESTS_919:-}" ] && LD_LIBRARY_PATH=$CUDNN919:$LD_LIBRARY_PATH timeout 200 $B/tests/test_gpu 2>&1 | tee "$OUT/gpu_tests_cudnn919.log" | tail -4 ;;
    crosscheck)
      for p in ${CROSS_PRECISIONS:-fp32 tf32 fp16 bf16}; do
        LD_LIBRARY_PATH=$CUDNN919:$LD_LIBRARY_PATH timeout 200 python3 tools/crosscheck_torchvision.py \
          --binary $B/cnnbench_infer --precision $p --batch 4 --extra="--verify" --out "$OUT/crosscheck_resnet50_$p.json" 2>&1 | grep -vE "^verify .* $" | tail -14
      done
      # The autotuned engines of the benchmark, checked too.
      for pb in "fp16 32" "fp32 8"; do
        set -- $pb
        LD_LIBRARY_PATH=$CUDNN919:$LD_LIBRARY_PATH timeout 200 python3 tools/crosscheck_torchvision.py \
          --binary $B/cnnbench_infer --precision $1 --batch $2 --extra="--engine autotune --verify" \
          --out "$OUT/crosscheck_resnet50_$1_b$2_autotune.json" 2>&1 | grep -vE "^verify .* $" | tail -12
      done ;;
    sweep)
      LD_LIBRARY_PATH=$CUDNN919:$LD_LIBRARY_PATH timeout ${SWEEP_TIMEOUT:-420} $B/cnnbench --config=${SWEEP_CONFIG:-configs/resnet50_fp16.yaml} \
        --benchmark_out="$OUT/cnnbench.json" ${SWEEP_ARGS:-} 2>&1 | tee "$OUT/cnnbench.log" | grep -E "batch|error|Error" | cut -c1-160 ;;
    peer)
      PYTHONUNBUFFERED=1 timeout ${PEER_TIMEOUT:-300} python3 tools/pytorch_baseline.py --out "$OUT/pytorch.json" ${PEER_ARGS:-} 2>&1 | tail -25 ;;
  esac
done
[ -f "$OUT/cnnbench.json" ] && [ -f "$OUT/pytorch.json" ] && \
  python3 tools/compare_pytorch.py --cnnbench "$OUT/cnnbench.json" --pytorch "$OUT/pytorch.json" --out-md "$OUT/compare_resnet50_fp16.md" --check

# Files come back from the device machine only a few at a time: pack them into one.
(cd "$OUT" && tar czf session.tgz --remove-files $(ls | grep -v '^session.tgz$'))
