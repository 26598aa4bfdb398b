#!/usr/bin/env bash
# Device call 48 (written 2026-12-05, not yet run). Issue 9's ResNet-50 training miss: which
# MLPerf-style BatchNorm fusions cuDNN builds on the H200, what each costs against the plain conv,
# and what it saves (cnnbench_bn_fusion_probe; NOTES.md, "BatchNorm fusion, the probe", has the
# predictions). GpuBnFusion first (a small layer: every form that builds must match its host
# reference), then five ResNet-50 layers at batch 256 in fp16, three engine configs per form.
# Carry: build/release/cnnbench_bn_fusion_probe, build/release/tests/test_gpu, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/f
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
timeout 90 $B/tests/test_gpu --gtest_filter='GpuBnFusion.*' >$O/f/gpu_bn_fusion.txt 2>&1
echo "GpuBnFusion rc=$? $(date +%T)"; grep -E "GpuBnFusion:|OK|FAILED" $O/f/gpu_bn_fusion.txt | head -12
timeout 200 $B/cnnbench_bn_fusion_probe --batch=256 --max_engines=3 --json=$O/f/bn_fusion_256.json \
  >$O/f/bn_fusion_256.txt 2>$O/f/bn_fusion_256.err
echo "probe rc=$? $(date +%T)"; cat $O/f/bn_fusion_256.txt; head -c 2000 $O/f/bn_fusion_256.err
(cd $O && tar czf f.tgz --remove-files f)
