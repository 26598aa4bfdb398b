#!/usr/bin/env python3
"""PyTorch's side of GpuTrainStep's "learns one batch" tests: the same network, with the weights
drawn as cnnbench's random_weights draws them (networks/weights.cpp), on the test's batch, for
the test's SGD steps, on the CPU or a GPU. It tells whether a learning rate the test uses is
one that PyTorch's own step can learn with, so that a network that fails to learn on the device
points at the test's settings or at our backward.

    python3 tools/learn_one_batch_torch.py --network vgg16_bn --lr 0.002 [--steps 30]
        [--size 224] [--batch 8] [--init cnnbench|torchvision] [--dropout P] [--device cpu]

The weight distributions follow random_weights: a conv's or linear's weight U(+-sqrt(6/fan_in)),
its bias U(+-1/sqrt(fan_in)); a BatchNorm's weight U(0.5, 1), bias U(-0.1, 0.1). The values are
not cnnbench's own (another generator); the batch is x ~ U(-1, 1) with labels (3i + 1) % 10, 10
classes, SGD with momentum 0.9 and no weight decay, as the test. Prints each step's loss and the
first/last ratio (the test asks >= 3 in 30 steps).
"""
import argparse
import math
import sys


def cnnbench_init(torch, model):
    for mod in model.modules():
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
            fan_in = mod.weight[0].numel()
            b = math.sqrt(6 / fan_in)
            torch.nn.init.uniform_(mod.weight, -b, b)
            if mod.bias is not None:
                torch.nn.init.uniform_(mod.bias, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
        elif isinstance(mod, torch.nn.BatchNorm2d):
            torch.nn.init.uniform_(mod.weight, 0.5, 1.0)
            torch.nn.init.uniform_(mod.bias, -0.1, 0.1)


def alexnet_lrn(torch, num_classes):
    """MXNet's AlexNet with LRN (networks/alexnet.cpp's alexnet_lrn): LRN size 5, alpha 1e-4,
    beta 0.75, k 2 after conv1 and conv2, dropout after fc1 and fc2."""
    nn = torch.nn
    lrn = lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)  # noqa: E731
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, 4), nn.ReLU(), lrn(), nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, 1, 2), nn.ReLU(), lrn(), nn.MaxPool2d(3, 2),
        nn.Conv2d(256, 384, 3, 1, 1), nn.ReLU(), nn.Conv2d(384, 384, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(3, 2), nn.Flatten(),
        nn.LazyLinear(4096), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(),
        nn.Dropout(0.5), nn.Linear(4096, num_classes))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", required=True,
                    help="a torchvision classification model, or alexnet_lrn (MXNet's)")
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--init", choices=("cnnbench", "torchvision"), default="cnnbench")
    ap.add_argument("--dropout", type=float, default=None, help="override every dropout's p")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"error: this tool needs torch and torchvision ({e})", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.network == "alexnet_lrn":
        model = alexnet_lrn(torch, 10)
        model(torch.zeros(1, 3, args.size, args.size))  # sizes the lazy fc1
    else:
        ctor = getattr(torchvision.models, args.network, None)
        if not callable(ctor):
            print(f"error: torchvision.models has no model {args.network!r}", file=sys.stderr)
            return 2
        model = ctor(num_classes=10)
    if args.init == "cnnbench":
        cnnbench_init(torch, model)
    if args.dropout is not None:
        for mod in model.modules():
            if isinstance(mod, torch.nn.Dropout):
                mod.p = args.dropout
    model = model.to(args.device).train()
    x = (torch.rand(args.batch, 3, args.size, args.size) * 2 - 1).to(args.device)
    y = torch.tensor([(3 * i + 1) % 10 for i in range(args.batch)], device=args.device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    losses = []
    for step in range(args.steps):
        opt.zero_grad(set_to_none=True)
        out = model(x)
        if isinstance(out, tuple) or hasattr(out, "logits"):  # Inception-v3's aux output
            out = out[0] if isinstance(out, tuple) else out.logits
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        print(f"step {step}: loss {losses[-1]:.4f}", flush=True)
        if not math.isfinite(losses[-1]):
            break
    ratio = losses[0] / losses[-1] if losses[-1] else math.inf
    print(f"{args.network} ({args.init} init) lr {args.lr:g}: loss {losses[0]:.4f} -> "
          f"{losses[-1]:.4f} after {len(losses)} steps ({ratio:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
