"""Device call 88: do cuDNN's own strided data-gradient kernels trip racecheck without cnnbench?
Call 85's racecheck over GpuTrainBackward reported 12 read/write hazards, all inside cuDNN's
sm90_xmma_dgrad_implicit_gemm_indexed_{f16f16,bf16bf16,f32f32_tf32f32}_..._strided kernels, none
in ours. Here PyTorch (its own choice of engine, channels_last) takes the data gradient of the
test's strided convs (3x3 s2 p1 12->8, 7x7 s2 p3 3->16, 1x1 s2 16->32, 3x3 s2 g2 8->16; batch 3,
odd sizes) in fp16, bf16 and tf32. Run under compute-sanitizer --tool racecheck: a hazard in the
same kernels would put them in cuDNN, whichever program calls them. Prints each gradient's
checksum so that a rerun can be compared."""
import torch

torch.manual_seed(0)
torch.backends.cudnn.allow_tf32 = True
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
cases = [("3x3 s2 p1", 12, 8, 3, 2, 1, 1), ("7x7 s2 p3", 3, 16, 7, 2, 3, 1),
         ("1x1 s2", 16, 32, 1, 2, 0, 1), ("3x3 s2 g2", 8, 16, 3, 2, 1, 2)]
for dtype, name in ((torch.half, "fp16"), (torch.bfloat16, "bf16"), (torch.float32, "tf32")):
    for label, c, k, r, s, p, g in cases:
        x = torch.randn(3, c, 13, 11, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
        x.requires_grad_(True)
        conv = torch.nn.Conv2d(c, k, r, stride=s, padding=p, groups=g, bias=False).to(
            device="cuda", dtype=dtype, memory_format=torch.channels_last)
        y = conv(x)
        y.backward(torch.randn_like(y))
        torch.cuda.synchronize()
        print(f"{name} {label}: dx checksum {x.grad.float().abs().sum().item():.6f}")
