#!/usr/bin/env bash
# One call on a GPU machine: the steps named (default: sweep peer tests crosscheck), each under a
# time limit, everything packed into $OUT/session.tgz (the device tool returns few files).
# Binaries come prebuilt in build/release (tools/build.sh); libraries the machine lacks
# (Debian's libbenchmark and yaml-cpp) in .carry/lib. CUDNN selects the cuDNN build.
#   sweep       configs/default.yaml (SWEEP_CONFIG), JSON + layer table (SWEEP_TIMEOUT, 330 s)
#   peer        PyTorch eager and CUDA-graph baseline on the same card (PEER_TIMEOUT, 100 s)
#   tests       the GPU tests (TEST_TIMEOUT, 150 s)
#   crosscheck  torchvision vs cnnbench_infer on the same weights, with per-layer checks
#   diagnose    tools/diagnose_graph.sh
#   zoo_tests   the zoo's GPU suites: GpuKernels, GpuNetwork.MixedOps*, GpuZoo (ZOO_TEST_TIMEOUT, 420 s)
#   zoo_cross   fp32 logits against torchvision for AlexNet, VGG-16, Inception-v3, ResNet-152,
#               EfficientNet-B0 and B4 (relative L2 below 1e-4), batch 2
#   zoo_sweep   configs/zoo_speed.yaml: fp16 at batch 1, 8, 32, 128, 256 (ZOO_SWEEP_TIMEOUT, 420 s)
#   zoo_peer    PyTorch's CUDA-graph replay, fp16 channels_last, same networks and batches
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=build/release
CUDNN=${CUDNN:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib}
export LD_LIBRARY_PATH=$CUDNN:$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv,noheader
for step in ${*:-sweep peer tests crosscheck}; do
  echo "=== $step $(date +%T)"
  case $step in
    sweep)
      timeout "${SWEEP_TIMEOUT:-330}" $B/cnnbench --config="${SWEEP_CONFIG:-configs/default.yaml}" \
        --benchmark_out="$OUT/cnnbench.json" ${SWEEP_ARGS:-} >"$OUT/cnnbench.log" 2>&1
      echo "sweep rc=$? medians=$(grep -c manual_time_median "$OUT/cnnbench.log")"
      grep -E "ERROR OCCURRED" "$OUT/cnnbench.log" | cut -c1-180 | sort -u | head -10 ;;
    peer)
      PYTHONUNBUFFERED=1 timeout "${PEER_TIMEOUT:-100}" python3 tools/pytorch_baseline.py \
        --out "$OUT/pytorch.json" >"$OUT/pytorch.log" 2>&1
      echo "peer rc=$?"
      python3 tools/compare_pytorch.py --cnnbench "$OUT/cnnbench.json" --pytorch "$OUT/pytorch.json" \
        --out-md "$OUT/compare_resnet50_fp16.md" --check | tail -16 ;;
    tests)
      timeout "${TEST_TIMEOUT:-150}" $B/tests/test_gpu >"$OUT/gpu_tests.log" 2>&1
      echo "tests rc=$?"
      grep -E "Failure|FAILED|PASSED|worst|rel_l2|resnet50 " "$OUT/gpu_tests.log" | head -40 ;;
    crosscheck)
      for c in "fp32 4 heuristic" "tf32 4 heuristic" "fp16 4 heuristic" "bf16 4 heuristic" \
               "fp16 32 autotune"; do
        set -- $c
        timeout 60 python3 tools/crosscheck_torchvision.py --binary $B/cnnbench_infer --precision "$1" \
          --batch "$2" --extra="--engine $3 --verify=128" --out "$OUT/crosscheck_$1_b$2_$3.json" \
          >"$OUT/crosscheck_$1_b$2_$3.log" 2>&1
        echo "$c rc=$?"
        grep -E "rel L2 error|graph replay|refused|exceed|CUDA graph error" \
          "$OUT/crosscheck_$1_b$2_$3.log" | head -4
      done ;;
    diagnose)
      bash tools/diagnose_graph.sh "$CUDNN" 2>&1 | tee "$OUT/diagnose.log" ;;
    zoo_tests)
      timeout "${ZOO_TEST_TIMEOUT:-420}" $B/tests/test_gpu \
        --gtest_filter='GpuKernels.*:GpuNetwork.MixedOps*:GpuZoo.*' >"$OUT/zoo_tests.log" 2>&1
      echo "zoo_tests rc=$?"
      grep -E "Failure|FAILED|PASSED|mixed ops|Which is|differs" "$OUT/zoo_tests.log" | head -40 ;;
    zoo_cross)
      for net in alexnet vgg16 inception_v3 resnet152 efficientnet_b0 efficientnet_b4; do
        timeout 90 python3 tools/crosscheck_torchvision.py --binary $B/cnnbench_infer \
          --network $net --precision fp32 --batch 2 --extra="--verify=64" \
          --out "$OUT/crosscheck_${net}_fp32.json" >"$OUT/crosscheck_${net}_fp32.log" 2>&1
        echo "$net rc=$? $(grep -E 'rel L2 error' "$OUT/crosscheck_${net}_fp32.log" | head -1)"
      done ;;
    zoo_sweep)
      timeout "${ZOO_SWEEP_TIMEOUT:-420}" $B/cnnbench --config=configs/zoo_speed.yaml \
        --benchmark_out="$OUT/zoo.json" >"$OUT/zoo.log" 2>&1
      echo "zoo_sweep rc=$? medians=$(grep -c manual_time_median "$OUT/zoo.log")"
      grep -E "ERROR OCCURRED" "$OUT/zoo.log" | cut -c1-180 | sort -u | head -10 ;;
    zoo_peer)
      PYTHONUNBUFFERED=1 timeout "${ZOO_PEER_TIMEOUT:-240}" python3 tools/pytorch_baseline.py \
        --models alexnet,vgg16,inception_v3,resnet50,resnet152,efficientnet_b0,efficientnet_b4 \
        --batches 1,8,32,128,256 --modes graph --reps 3 --out "$OUT/zoo_pytorch.json" \
        >"$OUT/zoo_pytorch.log" 2>&1
      echo "zoo_peer rc=$?"
      for net in alexnet vgg16 inception_v3 resnet50 resnet152 efficientnet_b0 efficientnet_b4; do
        python3 tools/compare_pytorch.py --cnnbench "$OUT/zoo.json" --pytorch "$OUT/zoo_pytorch.json" \
          --network $net --precision fp16 --out-md "$OUT/compare_${net}_fp16.md" --check \
          --batch1-ratio 1.3 | tail -3
      done ;;
  esac
done
(cd "$OUT" && tar czf session.tgz --remove-files $(ls | grep -v '^session.tgz$'))
