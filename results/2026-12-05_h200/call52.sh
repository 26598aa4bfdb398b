#!/usr/bin/env bash
# Device call 52 (2026-12-05): call 51 (ResNet-50's fp16 training step at 256, padded stem off and
# on) and call 48 (the BatchNorm-fusion probe) in one cold start, under 10 minutes.
# Carry: build/release/cnnbench, build/release/cnnbench_bn_fusion_probe,
#        build/release/tests/test_gpu, .carry
set -u
bash results/2026-12-05_h200/call51.sh
bash results/2026-12-04_h200/call48.sh
