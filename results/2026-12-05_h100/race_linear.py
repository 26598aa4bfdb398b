"""Device call 77: do cuBLAS's own GEMM kernels trip racecheck without cnnbench? PyTorch's
F.linear (its bundled cuBLAS, its own choice of kernel) on AlexNet's classifier shapes at batch 2,
fp16, as in call 76, where racecheck reported read/write hazards inside cuBLAS's nvjet_sm90
kernels (cnnbench's LinearOp, AlexNet fc6 to fc8) and in none of ours. Run under
compute-sanitizer --tool racecheck; prints each output's checksum so that a rerun can be
compared."""
import torch

torch.manual_seed(0)
print("torch", torch.__version__, "cuda", torch.version.cuda, "cublas via", torch.backends.cuda.preferred_blas_library())
x = torch.randn(2, 9216, device="cuda", dtype=torch.half)
for k, n, relu in [(9216, 4096, True), (4096, 4096, True), (4096, 1000, False)]:
    w = torch.randn(n, k, device="cuda", dtype=torch.half) * k**-0.5
    b = torch.randn(n, device="cuda", dtype=torch.half)
    y = torch.nn.functional.linear(x, w, b)
    if relu:
        y = torch.relu(y)
    torch.cuda.synchronize()
    print(f"linear {k}->{n}: checksum {y.float().abs().sum().item():.6f}")
    x = y
