#!/usr/bin/env python3
"""Issue 10: does compute-sanitizer's racecheck fail on cuDNN's fp16 kernels without cnnbench?

cnnbench's fp16 runs under racecheck with a kernel filter (--kernel-name kns=cnnbench, calls 77 and
78; --kernel-name-exclude for cuDNN's and cuBLAS's kernels, calls 108 and 109) stop after a few
seconds with "Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception", then
CUDA error 700. fp32 runs with the same filters go on. This script is the same kind of work with no
cnnbench code: a few of ResNet-50's convolutions, forward and backward, in fp16 channels_last at
batch 2 through PyTorch (cuDNN's Hopper engines), then a GEMM (cuBLAS). Run it under the tool with
and without the same filters: the same failure here says the tool and cuDNN's kernels meet it, not
cnnbench's kernels or its use of cuDNN.

It prints one line per stage and "ok" at the end; a CUDA error ends it with the error's text and
exit 1. --dtype fp32 runs the same in fp32 (the control the cnnbench runs had).
"""
import argparse
import sys

# (channels in, channels out, kernel, stride, size): ResNet-50's stem, a 3x3, a strided 3x3 and a
# 1x1, at batch 2.
LAYERS = [(3, 64, 7, 2, 224), (64, 64, 3, 1, 56), (128, 128, 3, 2, 56), (256, 64, 1, 1, 56)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=["fp16", "fp32"], default="fp16")
    ap.add_argument("--batch", type=int, default=2)
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("racecheck_torch_repro: no PyTorch here (the device has it in /opt/torch/.venv)",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("racecheck_torch_repro: no CUDA device", file=sys.stderr)
        return 2
    dt = torch.float16 if a.dtype == "fp16" else torch.float32
    torch.backends.cudnn.benchmark = False  # heuristics' first choice: one engine a shape
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}, {a.dtype}, batch {a.batch}", flush=True)
    try:
        for cin, cout, k, s, hw in LAYERS:
            conv = torch.nn.Conv2d(cin, cout, k, s, k // 2, bias=False).cuda().to(dt)
            conv = conv.to(memory_format=torch.channels_last)
            x = torch.randn(a.batch, cin, hw, hw, device="cuda", dtype=dt)
            x = x.to(memory_format=torch.channels_last).requires_grad_(True)
            y = conv(x)
            y.backward(torch.randn_like(y))
            torch.cuda.synchronize()
            print(f"conv {cin}->{cout} k{k} s{s} at {hw}: forward, data and weight gradient done",
                  flush=True)
        m = torch.randn(256, 2048, device="cuda", dtype=dt)
        w = torch.randn(2048, 1000, device="cuda", dtype=dt)
        (m @ w).sum().item()
        print("gemm 256x2048x1000 done", flush=True)
    except RuntimeError as e:  # torch raises CUDA errors as RuntimeError
        print(f"racecheck_torch_repro: {e}".splitlines()[0], file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
