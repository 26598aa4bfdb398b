#!/usr/bin/env bash
# Device call 59 (2026-12-05): what call 56 left. E: EfficientNet-B0's fp16 training step at 256
# (issue 9's eighth target; call 56's sweep was cut off before it; its PyTorch peer ran there:
# 4,778 img/s). F: the BatchNorm-fusion probe (../2026-12-04_h200/call48.sh's steps): which
# fused forms cuDNN builds here and what each costs, for ResNet-50 training's miss.
# BUDGET (s, default 420) cuts each step. Carry: build/release/cnnbench,
# build/release/cnnbench_bn_fusion_probe, build/release/tests/test_gpu, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/e $O/f
END=$((SECONDS + ${BUDGET:-420}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
timeout $(lim 180) $B/cnnbench --config=configs/issue9_targets.yaml \
  --benchmark_filter='efficientnet_b0/fp16/train' --benchmark_out=$O/e/ours.json \
  --layers_out=$O/e/ours.layers.json >$O/e/ours.log 2>&1
echo "E rc=$? ${SECONDS}s"; grep -E "ERROR|_median|_stddev" $O/e/ours.log | cut -c1-140
(cd $O && tar czf e.tgz --remove-files e)
timeout $(lim 60) $B/tests/test_gpu --gtest_filter='GpuBnFusion.*' >$O/f/gpu_bn_fusion.txt 2>&1
echo "GpuBnFusion rc=$? ${SECONDS}s"; grep -E "GpuBnFusion:|OK \]|FAILED +\]" $O/f/gpu_bn_fusion.txt | head -12
timeout $(lim 200) $B/cnnbench_bn_fusion_probe --batch=256 --max_engines=3 \
  --json=$O/f/bn_fusion_256.json >$O/f/bn_fusion_256.txt 2>$O/f/bn_fusion_256.err
echo "probe rc=$? ${SECONDS}s"; cat $O/f/bn_fusion_256.txt; head -c 1500 $O/f/bn_fusion_256.err
(cd $O && tar czf f.tgz --remove-files f)
echo "end ${SECONDS}s"
