#!/usr/bin/env bash
# One call on a GPU machine: the steps named (default: sweep peer tests crosscheck), each under a
# time limit, everything packed into $OUT/session.tgz (the device tool returns few files).
# Binaries come prebuilt in build/release (tools/build.sh); libraries the machine lacks
# (Debian's libbenchmark and yaml-cpp) in .carry/lib. CUDNN selects the cuDNN build.
#   sweep       configs/default.yaml (SWEEP_CONFIG), JSON + layer table (SWEEP_TIMEOUT, 330 s)
#   peer        PyTorch eager and CUDA-graph baseline on the same card (PEER_TIMEOUT, 100 s), compared
#               with cnnbench.json, or zoo_resnet50.json where no sweep ran
#   tests       the GPU tests (TEST_TIMEOUT, 150 s)
#   crosscheck  torchvision vs cnnbench_infer on the same weights, with per-layer checks
#   diagnose    tools/diagnose_graph.sh
#   zoo_tests   the zoo's GPU suites: GpuKernels, GpuNetwork.MixedOps*, GpuZoo (ZOO_TEST_TIMEOUT, 420 s)
#   zoo_cross   fp32 logits against torchvision for AlexNet, VGG-16, Inception-v3, ResNet-152,
#               EfficientNet-B0 and B4 (relative L2 below 1e-4), batch 2
#   zoo_sweep   configs/zoo_speed.yaml: fp16 at batch 1, 8, 32, 128, 256, one process per network of
#               ZOO_NETS (ZOO_NET_TIMEOUT each; ZOO_BATCHES a regex; ZOO_BIN, ZOO_ARGS)
#   train_cross one SGD step of ResNet-50 (batch 8, fp32) by cnnbench_train_step against PyTorch's
#               on the same weights and batch: loss, gradient norms, updated weights
#               (tools/train_step_crosscheck.py; TRAIN_CROSS_TIMEOUT, 200 s)
#   train_sweep configs/train.yaml (TRAIN_CONFIG): the training step's benchmarks, JSON + layer
#               table (TRAIN_TIMEOUT, 240 s; TRAIN_ARGS)
#   train_peer  PyTorch's training step beside a train_sweep of the same call
#               (tools/pytorch_train_baseline.py, TRAIN_PEER_MODELS, TRAIN_PEER_BATCHES, eager and
#               graph, fp16), then tools/compare_train.py (TRAIN_PEER_TIMEOUT, 300 s)
#   soak        the default sweep (SOAK_CONFIG) three times in one process (--soak=3), judged by
#               tools/check_soak.py (SOAK_TIMEOUT, 500 s)
#   sanitize    tools/sanitize_gpu.sh: compute-sanitizer over NETS x PRECISIONS x MODES x TOOLS
#               (SANITIZE_TIMEOUT, 400 s; RUN_TIMEOUT per run)
#   max_batch   tools/max_batch_sweep.sh: the largest batch at each card size (MAX_BATCH_CONFIG,
#               configs/max_batch.yaml; SIZES; MAX_BATCH_TIMEOUT, 400 s)
#   edges_ab    ResNet-50 fp16 at batch 1, 8, 64, 256 with --graph_edges=captured and =full
#   zoo_peer    PyTorch's CUDA-graph replay, fp16 channels_last, the torchvision nets of ZOO_NETS
#   checks      correctness only, in parallel processes sharing the GPU (no timing): the zoo's
#               GPU suites in CHECKS_SHARDS (8) shards, GpuKernels/GpuOps/GpuNetwork and GpuTrain* (two
#               processes), those for the
#               patched kernels in .carry/patched (when there), fp32 and fp16 cross-checks of all
#               16 torchvision networks (4 at a time; CHECKS_CROSS=0 skips them) and
#               tools/diagnose_graph.sh
# SESSION_BUDGET (570 s) bounds the whole call: every step's limit is cut to what is left, so the
# archive is always written.
set -u
END=$((SECONDS + ${SESSION_BUDGET:-570}))
lim() { local t=$1 r=$((END - SECONDS - 15)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
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
      timeout "$(lim ${SWEEP_TIMEOUT:-330})" $B/cnnbench --config="${SWEEP_CONFIG:-configs/default.yaml}" \
        --benchmark_out="$OUT/cnnbench.json" ${SWEEP_ARGS:-} >"$OUT/cnnbench.log" 2>&1
      echo "sweep rc=$? medians=$(grep -c manual_time_median "$OUT/cnnbench.log")"
      grep -E "ERROR OCCURRED|banned" "$OUT/cnnbench.log" | cut -c1-420 | sort -u | head -12 ;;
    peer)
      PYTHONUNBUFFERED=1 timeout "$(lim ${PEER_TIMEOUT:-100})" python3 tools/pytorch_baseline.py \
        --out "$OUT/pytorch.json" >"$OUT/pytorch.log" 2>&1
      echo "peer rc=$?"
      cb=$OUT/cnnbench.json; [ -f "$cb" ] || cb=$OUT/zoo_resnet50.json
      python3 tools/compare_pytorch.py --cnnbench "$cb" --pytorch "$OUT/pytorch.json" \
        --out-md "$OUT/compare_resnet50_fp16.md" --check | tail -16 ;;
    tests)
      timeout "$(lim ${TEST_TIMEOUT:-150})" $B/tests/test_gpu >"$OUT/gpu_tests.log" 2>&1
      echo "tests rc=$?"
      grep -E "Failure|FAILED|PASSED|worst|rel_l2|resnet50 " "$OUT/gpu_tests.log" | head -40 ;;
    crosscheck)
      for c in "fp32 4 heuristic" "tf32 4 heuristic" "fp16 4 heuristic" "bf16 4 heuristic" \
               "fp16 32 autotune"; do
        set -- $c
        timeout "$(lim 60)" python3 tools/crosscheck_torchvision.py --binary $B/cnnbench_infer --precision "$1" \
          --batch "$2" --extra="--engine $3 --verify=128" --out "$OUT/crosscheck_$1_b$2_$3.json" \
          >"$OUT/crosscheck_$1_b$2_$3.log" 2>&1
        echo "$c rc=$?"
        grep -E "rel L2 error|graph replay|refused|exceed|CUDA graph error" \
          "$OUT/crosscheck_$1_b$2_$3.log" | head -4
      done ;;
    diagnose)
      timeout "$(lim 300)" bash tools/diagnose_graph.sh "$CUDNN" ${DIAG_MODE:-} 2>&1 | tee "$OUT/diagnose.log" ;;
    zoo_tests)
      timeout "$(lim ${ZOO_TEST_TIMEOUT:-420})" $B/tests/test_gpu \
        --gtest_filter='GpuKernels.*:GpuNetwork.MixedOps*:Zoo/GpuZoo.*' >"$OUT/zoo_tests.log" 2>&1
      echo "zoo_tests rc=$?"
      grep -E "Failure|FAILED|PASSED|mixed ops|Which is|differs" "$OUT/zoo_tests.log" | head -40 ;;
    zoo_cross)
      for net in alexnet vgg16 inception_v3 resnet152 efficientnet_b0 efficientnet_b4; do
        timeout "$(lim 90)" python3 tools/crosscheck_torchvision.py --binary $B/cnnbench_infer \
          --network $net --precision fp32 --batch 2 --extra="--verify=64" \
          --out "$OUT/crosscheck_${net}_fp32.json" >"$OUT/crosscheck_${net}_fp32.log" 2>&1
        echo "$net rc=$? $(grep -E 'rel L2 error' "$OUT/crosscheck_${net}_fp32.log" | head -1)"
      done ;;
    zoo_sweep)
      # One process per network, each with its own JSON, so a cut-off loses one network only.
      for net in ${ZOO_NETS:-alexnet vgg16 inception_bn inception_v3 resnet50 resnet152 efficientnet_b0 efficientnet_b4}; do
        timeout "$(lim ${ZOO_NET_TIMEOUT:-90})" ${ZOO_BIN:-$B/cnnbench} --config=configs/zoo_speed.yaml ${ZOO_ARGS:-} \
          --benchmark_filter="^$net/fp16/graph/batch:${ZOO_BATCHES:-[0-9]+}/" \
          --benchmark_out="$OUT/zoo_$net.json" >"$OUT/zoo_$net.log" 2>&1
        echo "zoo_sweep $net rc=$? medians=$(grep -c manual_time_median "$OUT/zoo_$net.log") $(date +%T)"
        grep -E "ERROR OCCURRED|banned" "$OUT/zoo_$net.log" | cut -c1-420 | sort -u | head -6
      done ;;
    checks)
      t=$(lim ${CHECKS_TIMEOUT:-300})
      # CHECKS_ZOO: the zoo networks to test (default all, in 6 shards), one process each.
      if [ -n "${CHECKS_ZOO:-}" ]; then
        for n in $CHECKS_ZOO; do
          timeout "$t" $B/tests/test_gpu --gtest_filter="Zoo/GpuZoo.*/$n" >"$OUT/zoo_tests_$n.log" 2>&1 &
        done
      else
        for ((i = 0; i < ${CHECKS_SHARDS:-8}; i++)); do
          GTEST_TOTAL_SHARDS=${CHECKS_SHARDS:-8} GTEST_SHARD_INDEX=$i timeout "$t" $B/tests/test_gpu \
            --gtest_filter='Zoo/GpuZoo.*' >"$OUT/zoo_tests_$i.log" 2>&1 &
        done
      fi
      timeout "$t" $B/tests/test_gpu --gtest_filter='GpuKernels.*:GpuOps.*:GpuNetwork.*' \
        >"$OUT/kernel_tests.log" 2>&1 &
      timeout "$t" $B/tests/test_gpu --gtest_filter='GpuTrain*' >"$OUT/kernel_tests_train.log" 2>&1 &
      if [ -x .carry/patched/test_gpu ]; then
        timeout "$t" .carry/patched/test_gpu --gtest_filter='GpuKernels.*:GpuOps.*:GpuNetwork.MixedOps*' \
          >"$OUT/kernel_tests_patched.log" 2>&1 &
      fi
      dm=${DIAG_MODE:-${DIAG_QUICK:+quick}}
      [ "$dm" = none ] || timeout "$t" bash tools/diagnose_graph.sh "$CUDNN" $dm >"$OUT/diagnose.log" 2>&1 &
      [ "${CHECKS_CROSS:-1}" = 1 ] || nets_skip=1
      nets="alexnet vgg16 vgg16_bn vgg19 vgg19_bn inception_v3 resnet50 resnet152"
      nets="$nets $(echo efficientnet_b{0..7})"
      [ -n "${nets_skip:-}" ] && nets=""
      for p in fp32 fp16; do for n in $nets; do echo "$n $p"; done; done | grep . |
        timeout "$t" xargs -P 4 -L 1 bash -c 'timeout 150 python3 tools/crosscheck_torchvision.py \
          --binary '"$B"'/cnnbench_infer --network $0 --precision $1 --batch 2 --extra="--verify=32" \
          --out "'"$OUT"'/crosscheck_$0_$1.json" >"'"$OUT"'/crosscheck_$0_$1.log" 2>&1;
          echo "cross $0 $1 rc=$? $(grep -E "rel L2 error" "'"$OUT"'/crosscheck_$0_$1.log" | head -1)"' &
      wait
      echo "checks done $(date +%T)"
      for f in "$OUT"/zoo_tests_*.log "$OUT"/kernel_tests*.log; do
        echo "--- $(basename $f): $(grep -E '^\[  (PASSED|FAILED) ' $f | tr '\n' ' ')"
        grep -E "Failure|Which is|differs|^\[  FAILED  \].*\(" "$f" | cut -c1-200 | head -8
      done
      [ -f "$OUT/diagnose.log" ] && grep -vE "^\s*$" "$OUT/diagnose.log" | cut -c1-200 | head -60 ;;
    train_cross)
      timeout "$(lim ${TRAIN_CROSS_TIMEOUT:-200})" python3 tools/train_step_crosscheck.py \
        --binary $B/cnnbench_train_step --network resnet50 --batch 8 --workdir /tmp/train_cross \
        --out "$OUT/train_cross.json" >"$OUT/train_cross.log" 2>&1
      echo "train_cross rc=$?"; tail -30 "$OUT/train_cross.log" | cut -c1-200 ;;
    train_sweep)
      timeout "$(lim ${TRAIN_TIMEOUT:-240})" $B/cnnbench --config="${TRAIN_CONFIG:-configs/train.yaml}" \
        --benchmark_out="$OUT/train.json" ${TRAIN_ARGS:-} >"$OUT/train.log" 2>&1
      echo "train_sweep rc=$? medians=$(grep -c manual_time_median "$OUT/train.log")"
      grep -E "ERROR OCCURRED|manual_time_median" "$OUT/train.log" | cut -c1-300 | sort -u | head -16 ;;
    train_peer)
      PYTHONUNBUFFERED=1 timeout "$(lim ${TRAIN_PEER_TIMEOUT:-300})" python3 tools/pytorch_train_baseline.py \
        --models "${TRAIN_PEER_MODELS:-resnet50,efficientnet_b0}" --batches "${TRAIN_PEER_BATCHES:-32,64,256}" \
        --modes eager,graph --precision fp16 --out "$OUT/pytorch_train.json" >"$OUT/pytorch_train.log" 2>&1
      echo "train_peer rc=$?"
      python3 tools/compare_train.py --cnnbench "$OUT/train.json" --pytorch "$OUT/pytorch_train.json" \
        --out-md "$OUT/compare_train_fp16.md" --check | head -20 ;;
    soak)
      timeout "$(lim ${SOAK_TIMEOUT:-500})" $B/cnnbench --config="${SOAK_CONFIG:-configs/default.yaml}" \
        --soak=3 --benchmark_out="$OUT/soak.json" >"$OUT/soak.log" 2>&1
      echo "soak rc=$?"
      python3 tools/check_soak.py "$OUT/soak.json" --out-md "$OUT/soak.md" | tail -20 ;;
    sanitize)
      timeout "$(lim ${SANITIZE_TIMEOUT:-400})" bash tools/sanitize_gpu.sh "$OUT/sanitize" | tail -40 ;;
    max_batch)
      timeout "$(lim ${MAX_BATCH_TIMEOUT:-400})" bash tools/max_batch_sweep.sh \
        "${MAX_BATCH_CONFIG:-configs/max_batch.yaml}" "$OUT/max_batch" 2>&1 | tail -12
      cat "$OUT/max_batch/max_batch.md" 2>/dev/null | head -20 ;;
    edges_ab)
      # ResNet-50 fp16 with the graph's programmatic edges as captured, then all made full.
      for e in captured full; do
        timeout "$(lim 60)" $B/cnnbench --config=configs/zoo_speed.yaml --graph_edges=$e \
          --benchmark_filter='^resnet50/fp16/graph/batch:(1|8|64|256)/' \
          --benchmark_out="$OUT/edges_$e.json" >"$OUT/edges_$e.log" 2>&1
        echo "edges_ab $e rc=$?"; grep -E 'manual_time_median' "$OUT/edges_$e.log" | cut -c1-150
        grep -E "ERROR OCCURRED" "$OUT/edges_$e.log" | cut -c1-200 | sort -u | head -4
      done ;;
    zoo_peer)
      # The torchvision networks among ZOO_NETS (inception_bn and alexnet_lrn have no PyTorch
      # peer), each compared with its zoo_<net>.json from a zoo_sweep earlier in the same call.
      tv=$(for n in ${ZOO_NETS:-alexnet vgg16 inception_v3 resnet50 resnet152 efficientnet_b0 efficientnet_b4}; do
        case $n in inception_bn|alexnet_lrn) ;; *) echo -n "$n,";; esac; done)
      PYTHONUNBUFFERED=1 timeout "$(lim ${ZOO_PEER_TIMEOUT:-240})" python3 tools/pytorch_baseline.py \
        --models "${tv%,}" --batches ${ZOO_PEER_BATCHES:-1,8,32,128,256} --modes graph --reps 3 --out "$OUT/zoo_pytorch.json" \
        >"$OUT/zoo_pytorch.log" 2>&1
      echo "zoo_peer rc=$?"
      for net in ${tv//,/ }; do
        python3 tools/compare_pytorch.py --cnnbench "$OUT/zoo_$net.json" --pytorch "$OUT/zoo_pytorch.json" \
          --network $net --precision fp16 --out-md "$OUT/compare_${net}_fp16.md" --check \
          --batch1-ratio 1.3 | tail -3
      done ;;
  esac
done
(cd "$OUT" && tar czf session.tgz --remove-files $(ls | grep -v '^session.tgz$'))
