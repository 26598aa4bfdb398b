#!/usr/bin/env bash
# Device call 50 (written 2026-12-05, not yet run): the two layer probes, call 48 (BatchNorm
# fusion, about 3 minutes) then call 46 (FP8, about 4 minutes), in one cold start.
# Carry: build/release/cnnbench_bn_fusion_probe, build/release/cnnbench_fp8_probe,
#        build/release/tests/test_gpu, .carry
set -u
bash results/2026-12-04_h200/call48.sh
bash results/2026-12-04_h200/call46.sh
