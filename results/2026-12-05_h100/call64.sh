#!/usr/bin/env bash
# Device call 64 (2026-12-05, evening session): the short items that can close issues, in one call.
# G: issue 7's GEMM ceilings (--gemm_ceiling: fp16, bf16, tf32; 5 repetitions), as call 62's G.
# Then call 61's steps M (issue 6's largest StyleGAN3-T training batch), S (the stem kernel's new
# gather: GPU tests, then ResNet-50 32 and 256), N (issue 8's ncu command), Z (issue 10's
# initcheck and synccheck with their options). Call 61's F (the fusion probe) is left out.
# Carry: build/release/cnnbench, build/release/cnnbench_stylegan_train, build/release/cnnbench_infer,
# build/release/tests/test_gpu, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/g
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
timeout 80 build/release/cnnbench --config=configs/default.yaml --gemm_ceiling --benchmark_filter='gemm/' \
  --benchmark_repetitions=5 --benchmark_out=$O/g/gemm.json >$O/g/gemm.log 2>&1
echo "G rc=$? ${SECONDS}s"; grep -E "_median|ERROR" $O/g/gemm.log | cut -c1-160
(cd $O && tar czf g.tgz --remove-files g)
BUDGET=$((${BUDGET:-570} - SECONDS)) STEPS="M S N Z" bash results/2026-12-05_h100/call61.sh
