#!/usr/bin/env python3
"""W3 in PyTorch: the reference fedaudit's GPU backend is timed against (issue 26, goal 3).

Noisy-FedAvg on R replicas (half train on C, half on C'), each round every one of M = 10 clients
takes K = 1 local step of whole-gradient clipped SGD (clip V) on a minibatch of B = 32 of its 64
synthetic 3x32x32 images, adds Gaussian noise sigma to its parameters, and the server averages
the clients. The model is ResNet-18 with GroupNorm (32 groups) and the CIFAR stem (a 3x3
convolution, no max pooling), as fedaudit's `resnet` kind with stages 4, blocks 2, width 64.

Two forms:
  vmap  every (replica, client) model at once: torch.func.vmap over grad of functional_call,
        with the parameters stacked (the batched form a PyTorch user reaches for);
  loop  one model, a Python loop over replicas and clients (the form written first).
With --compile MODE (default, reduce-overhead or max-autotune; PyTorch 2) the vmap form's
step (vmap over grad) is compiled with torch.compile in that mode (the backend field says
torch-vmap+MODE); the warm-up round compiles it. With --tf32 the products and convolutions run
in TF32 on the tensor cores (backend torch-...-tf32), to set beside fedaudit's
`train.precision: tf32` (the kit's bench-gpu-w3-tf32); FP32 with TF32 off otherwise.

Prints one JSON object per replica count, with the kit's field names (workload, backend,
replicas, rounds, seconds, replica_rounds_per_s), so `run.sh`'s summary can sit beside it.

  python3 w3.py --impl vmap --replicas 8,16,32 --rounds 2 [--device cuda] [--compile reduce-overhead] [--tf32]
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CLIENTS, PER_CLIENT, CLASSES, SIDE = 10, 64, 10, 32
STEPS, BATCH, LR, CLIP, SIGMA = 1, 32, 0.05, 1.0, 0.01


class Residual(nn.Module):
    """Two 3x3 convolutions with GroupNorm and a shortcut (1x1 when the shape changes)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = nn.Conv2d(cin, cout, 3, stride, 1)
        self.na = nn.GroupNorm(32, cout)
        self.b = nn.Conv2d(cout, cout, 3, 1, 1)
        self.nb = nn.GroupNorm(32, cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride), nn.GroupNorm(32, cout))

    def forward(self, x):
        y = self.nb(self.b(F.relu(self.na(self.a(x)))))
        return F.relu(y + (x if self.short is None else self.short(x)))


class ResNet18(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1), nn.GroupNorm(32, 64), nn.ReLU())
        blocks, cin = [], 64
        for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [Residual(cin, width, stride), Residual(width, width, 1)]
            cin = width
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(512, CLASSES)

    def forward(self, x):
        return self.head(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


def worlds(device):
    """Clients' images of both worlds: C' replaces client 0's image 0 by one of another class."""
    gen = torch.Generator().manual_seed(3)
    protos = torch.rand(CLASSES, 3, SIDE, SIDE, generator=gen)
    labels = torch.randint(0, CLASSES, (CLIENTS, PER_CLIENT), generator=gen)
    images = (protos[labels] + 0.3 * torch.randn(CLIENTS, PER_CLIENT, 3, SIDE, SIDE, generator=gen)).clamp(0, 1)
    images2, labels2 = images.clone(), labels.clone()
    labels2[0, 0] = (labels[0, 0] + 1) % CLASSES
    images2[0, 0] = (protos[labels2[0, 0]] + 0.3 * torch.randn(3, SIDE, SIDE, generator=gen)).clamp(0, 1)
    return [(images.to(device), labels.to(device)), (images2.to(device), labels2.to(device))]


def clipped(grads):
    """Whole-gradient clipping of each model's gradient (leading dimension: the models)."""
    flat = torch.cat([g.flatten(1) for g in grads], dim=1)
    scale = (CLIP / flat.norm(dim=1).clamp_min(1e-12)).clamp(max=1.0)
    return [g * scale.view(-1, *([1] * (g.dim() - 1))) for g in grads]


def run_vmap(model, data, replicas, rounds, device, compile_mode=None, marks=None):
    try:
        from torch.func import functional_call, grad, vmap
    except ImportError:  # PyTorch 1.13 (Debian's python3-torch): functorch and stateless
        from functorch import grad, vmap
        from torch.nn.utils.stateless import functional_call

    names = [n for n, _ in model.named_parameters()]
    base = [p.detach() for _, p in model.named_parameters()]
    glob = [p.unsqueeze(0).repeat(replicas, *([1] * p.dim())).clone() for p in base]

    def loss(params, x, y):
        out = functional_call(model, dict(zip(names, params)), (x.unsqueeze(0),) if x.dim() == 3 else (x,))
        return F.cross_entropy(out, y)

    step = vmap(grad(loss), in_dims=(0, 0, 0))
    if compile_mode:
        step = compiled(step, compile_mode)
    world = torch.arange(replicas, device=device) % 2
    gen = torch.Generator(device=device).manual_seed(7)
    for t in range(rounds):
        idx = torch.randperm(PER_CLIENT, generator=torch.Generator().manual_seed(t))[:BATCH]
        # Every (replica, client) model at once: CLIENTS x replicas models.
        params = [g.repeat(CLIENTS, *([1] * (g.dim() - 1))) for g in glob]
        xs, ys = [], []
        for c in range(CLIENTS):
            for r in range(replicas):
                x, y = data[int(world[r])]
                xs.append(x[c, idx])
                ys.append(y[c, idx])
        x, y = torch.stack(xs), torch.stack(ys)
        for _ in range(STEPS):
            gs = clipped(step(params, x, y))
            params = [p - LR * g for p, g in zip(params, gs)]
        for i, p in enumerate(params):
            noisy = p + SIGMA * torch.randn(p.shape, device=device, generator=gen)
            glob[i] = noisy.view(CLIENTS, replicas, *p.shape[1:]).mean(0)
        mark_round(device, marks)
    if device.type == "cuda":
        torch.cuda.synchronize()


def mark_round(device, marks):
    """Appends the time at which the round just issued has run (marks None: nothing), as the
    kit's RoundClock notes the end of fedaudit's rounds, which end with a read."""
    if marks is None:
        return
    if device.type == "cuda":
        torch.cuda.synchronize()
    marks.append(time.perf_counter())


# compiled keeps one compiled step per mode: the warm-up round compiles it, the timed rounds
# (another run_vmap call) reuse it.
_compiled = {}


def compiled(step, mode):
    if mode not in _compiled:
        _compiled[mode] = torch.compile(step, mode=mode, dynamic=False)
    return _compiled[mode]


def run_loop(model, data, replicas, rounds, device, marks=None):
    world = [r % 2 for r in range(replicas)]
    glob = [{k: v.clone() for k, v in model.state_dict().items()} for _ in range(replicas)]
    gen = torch.Generator(device=device).manual_seed(7)
    for t in range(rounds):
        idx = torch.randperm(PER_CLIENT, generator=torch.Generator().manual_seed(t))[:BATCH]
        for r in range(replicas):
            acc = None
            for c in range(CLIENTS):
                model.load_state_dict(glob[r])
                x, y = data[world[r]]
                for _ in range(STEPS):
                    model.zero_grad()
                    F.cross_entropy(model(x[c, idx]), y[c, idx]).backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
                    with torch.no_grad():
                        for p in model.parameters():
                            p -= LR * p.grad
                with torch.no_grad():
                    state = {k: v + SIGMA * torch.randn(v.shape, device=device, generator=gen) if v.is_floating_point() else v
                             for k, v in model.state_dict().items()}
                acc = state if acc is None else {k: acc[k] + state[k] for k in acc}
            glob[r] = {k: v / CLIENTS for k, v in acc.items()}
        mark_round(device, marks)
    if device.type == "cuda":
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", choices=["vmap", "loop"], default="vmap")
    ap.add_argument("--replicas", default="8")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    ap.add_argument("--compile", choices=["default", "reduce-overhead", "max-autotune"],
                    help="compile the vmap form's step with torch.compile in this mode")
    ap.add_argument("--tf32", action="store_true", help="TF32 products and convolutions (tensor cores)")
    args = ap.parse_args()
    if args.compile and (args.impl != "vmap" or not hasattr(torch, "compile")):
        raise SystemExit(f"w3.py: --compile needs --impl vmap and PyTorch 2 (this is {torch.__version__})")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    device = torch.device(args.device)
    torch.manual_seed(1)
    model = ResNet18().to(device)
    data = worlds(device)
    backend = f"torch-{args.impl}" + (f"+{args.compile}" if args.compile else "") + ("-tf32" if args.tf32 else "")
    if args.impl == "vmap":
        def run(model, data, replicas, rounds, device, marks=None):
            return run_vmap(model, data, replicas, rounds, device, args.compile, marks)
    else:
        run = run_loop
    for replicas in (int(r) for r in args.replicas.split(",")):
        if replicas < 2 or replicas % 2:
            raise SystemExit(f"w3.py: replica counts are even and >= 2, got {replicas}")
        run(model, data, replicas, 1, device)  # warm-up: one round
        marks = []
        start = time.perf_counter()
        run(model, data, replicas, args.rounds, device, marks)
        sec = time.perf_counter() - start
        out = {"workload": "W3", "backend": backend, "device": str(device),
               "replicas": replicas, "rounds": args.rounds, "seconds": sec,
               "replica_rounds_per_s": replicas * args.rounds / sec}
        # The kit's split: the time to the end of round 1 and the rate of the rounds after it.
        if marks:
            out["first_round_seconds"] = marks[0] - start
            if args.rounds > 1 and sec > marks[0] - start:
                out["steady_replica_rounds_per_s"] = replicas * (args.rounds - 1) / (start + sec - marks[0])
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
