#!/usr/bin/env bash
# Device call 78 (run inline, recorded here as it ran; 19 s): does racecheck's kernel filter itself
# break fp16 runs? Call 77's filtered racecheck failed every fp16 run ("The Sanitizer failed to
# handle a hardware exception", then error 700) and passed the fp32 ones; call 76's unfiltered
# racecheck ran AlexNet fp16 through. Here AlexNet fp16 inference alone (no other process on the
# card): racecheck with --kernel-name kns=cnnbench, with --kernel-name-exclude kns=nvjet, and
# memcheck with the filter.
tar xJf .carry/bins.txz; export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib; CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer); A="build/release/cnnbench_infer --network=alexnet --precision=fp16 --batch=2 --engine=heuristic --output=/tmp/a.safetensors --depthwise=cnnbench --stem=cnnbench"; for f in "--kernel-name kns=cnnbench" "--kernel-name-exclude kns=nvjet" "--kernel-name kns=cnnbench --num-cuda-barriers 4096"; do echo "== racecheck $f"; timeout 25 $CS --tool racecheck $f --print-limit 5 $A 2>&1 | grep -vE "^=========     " | grep -E "=====|error" | head -6; done; echo "== memcheck kns=cnnbench"; timeout 20 $CS --tool memcheck --kernel-name kns=cnnbench $A 2>&1 | grep -E "=====|error" | head -4
