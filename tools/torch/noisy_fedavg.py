#!/usr/bin/env python3
"""Reference external trainer for `audit import`: Noisy-FedAvg of an MLP or LeNet-5 in PyTorch.

Needs only Debian's python3-torch and python3-numpy. It trains N coupled pairs of runs, each
pair once on world C and once on world C' with the same noise, and writes every checkpoint as a
safetensors file (written by hand: 8-byte header length, JSON header, raw float32), optionally
the target client's uploads, plus a manifest.csv that `audit import` reads.

The algorithm is the one of docs/training.md ("Algorithms as implemented"), full batches:

    every client i starts from w_t
    for k = 0..K-1:
        g = gradient of the mean softmax cross-entropy over the client's samples
        g <- g / max(1, ||g|| / V)                (the whole parameter vector)
        w <- w - eta g
    upload_i = w_{i,K} + sigma z_i                (Gaussian noise on each upload)
    w_{t+1} = (1/m) sum_i upload_i

Models (--model): "mlp", one tanh/relu/softplus hidden layer (nn.Linear order: fc1.weight,
fc1.bias, fc2.weight, fc2.bias); "lenet5", fedaudit's LeNet-5 on 1x28x28 inputs (conv 1->6 5x5
pad 2, ReLU, max-pool 2; conv 6->16 5x5, ReLU, max-pool 2; 400->120, ReLU; 120->84, ReLU;
84->classes; --classic: tanh and average pooling), in nn.Module order conv1, conv2, fc1, fc2,
fc3. All runs' clients are trained at once: a replica-client pair is a group of a grouped
convolution, or a batch of an einsum.

Planted bugs (--bug): "reuse-noise" draws each client's z_i once and adds the same vector every
round; "no-clip" skips the clipping. Both break the privacy claim of the correct algorithm.

The data comes from --data, the .npz that `audit datasets export --config F --out data.npz`
writes from the experiment config, so both trainers see the same clients and the same canary:
c/client<i>/x (float32, n x sample shape), c/client<i>/y (int64 labels), the same under
cprime/ for world C', and classes (docs/import.md). Every client of both worlds must hold the
same number of samples (adjacency replace or replace-client). --init gives w_0 as one
float32 .npy vector in fedaudit's parameter order (default: PyTorch's initialization, seeded).
"""
import argparse
import json
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F


def save_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().cpu().numpy().astype("<f4"))
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(tmp, path)


class MLP:
    """One hidden layer; parameters with a leading group dimension G (one model per group)."""

    def __init__(self, dim, hidden, classes, activation):
        self.names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
        self.shapes = [(hidden, dim), (hidden,), (classes, hidden), (classes,)]
        self.act = {"tanh": torch.tanh, "relu": torch.relu, "softplus": F.softplus}[activation]

    def init(self):
        fc1, fc2 = torch.nn.Linear(self.shapes[0][1], self.shapes[0][0]), torch.nn.Linear(self.shapes[2][1], self.shapes[2][0])
        return [fc1.weight.data, fc1.bias.data, fc2.weight.data, fc2.bias.data]

    def forward(self, ps, x):  # x: (G, n, dim) -> logits (G, n, classes)
        W1, b1, W2, b2 = ps
        h = self.act(torch.einsum("gnd,ghd->gnh", x, W1) + b1.unsqueeze(1))
        return torch.einsum("gnh,gch->gnc", h, W2) + b2.unsqueeze(1)


class LeNet5:
    """fedaudit's LeNet-5 (nn.LeNet5) on 1x28x28 inputs, G models at once."""

    def __init__(self, classes, classic):
        self.names = [f"{l}.{p}" for l in ("conv1", "conv2", "fc1", "fc2", "fc3") for p in ("weight", "bias")]
        self.shapes = [(6, 1, 5, 5), (6,), (16, 6, 5, 5), (16,), (120, 400), (120,), (84, 120), (84,), (classes, 84), (classes,)]
        self.act = torch.tanh if classic else torch.relu
        self.pool = F.avg_pool2d if classic else F.max_pool2d

    def init(self):
        mods = [torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.Conv2d(6, 16, 5),
                torch.nn.Linear(400, 120), torch.nn.Linear(120, 84), torch.nn.Linear(84, self.shapes[8][0])]
        return [t.data for m in mods for t in (m.weight, m.bias)]

    def forward(self, ps, x):  # x: (G, n, 784) -> logits (G, n, classes)
        G, n = x.shape[0], x.shape[1]
        c1w, c1b, c2w, c2b, f1w, f1b, f2w, f2b, f3w, f3b = ps
        # Group g's samples are channel g of a batch of n: a grouped convolution is every
        # model's convolution at once.
        h = x.reshape(G, n, 28, 28).transpose(0, 1)  # (n, G, 28, 28)
        h = F.conv2d(h, c1w.reshape(G * 6, 1, 5, 5), c1b.reshape(G * 6), padding=2, groups=G)
        h = self.pool(self.act(h), 2)
        h = F.conv2d(h, c2w.reshape(G * 16, 6, 5, 5), c2b.reshape(G * 16), groups=G)
        h = self.pool(self.act(h), 2)  # (n, G*16, 5, 5)
        h = h.reshape(n, G, 400).transpose(0, 1)  # PyTorch's flatten of each model's (16, 5, 5)
        h = self.act(torch.einsum("gnf,gof->gno", h, f1w) + f1b.unsqueeze(1))
        h = self.act(torch.einsum("gnf,gof->gno", h, f2w) + f2b.unsqueeze(1))
        return torch.einsum("gnf,gof->gno", h, f3w) + f3b.unsqueeze(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--pairs", type=int, required=True)
    p.add_argument("--model", default="mlp", choices=["mlp", "lenet5"])
    p.add_argument("--hidden", type=int, default=8, help="the MLP's hidden width")
    p.add_argument("--activation", default="tanh", choices=["tanh", "relu", "softplus"])
    p.add_argument("--classic", action="store_true", help="LeNet-5 with tanh and average pooling")
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument("--local-steps", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--clip", type=float, required=True)
    p.add_argument("--sigma", type=float, required=True)
    p.add_argument("--checkpoints", default="", help="comma-separated rounds (default: 0 and the last)")
    p.add_argument("--uploads", type=int, default=-1, metavar="CLIENT", help="also write this client's uploads")
    p.add_argument("--init", default="", help="w_0 as a float32 .npy vector in fedaudit's parameter order")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bug", default="none", choices=["none", "reuse-noise", "no-clip"])
    a = p.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

    npz = np.load(a.data)
    worlds = ("c", "cprime")  # world 0 = C, 1 = C'
    m = 0
    while f"c/client{m}/x" in npz:
        m += 1
    if m == 0:
        raise SystemExit(f"{a.data}: no c/client0/x: not written by `audit datasets export`")
    # X[w]: (m, n, dim) per world, each sample flattened in C order (as fedaudit stores it).
    xs = [[npz[f"{w}/client{i}/x"] if f"{w}/client{i}/x" in npz else None for i in range(m)] for w in worlds]
    if any(x is None or len(x) != len(xs[0][0]) for ws in xs for x in ws):
        raise SystemExit(f"{a.data}: this trainer needs every client in both worlds with the same number of samples")
    X = torch.stack([torch.stack([torch.from_numpy(x.reshape(len(x), -1).astype(np.float32)) for x in ws]) for ws in xs])
    Y = torch.stack([torch.stack([torch.from_numpy(npz[f"{w}/client{i}/y"].astype(np.int64)) for i in range(m)]) for w in worlds])
    classes = int(npz["classes"])
    dim, n = X.shape[-1], X.shape[2]
    P, R = a.pairs, 2 * a.pairs
    world = torch.arange(R) % 2  # replica r is pair r // 2, world r % 2
    Xg, Yg = X[world].reshape(R * m, n, dim), Y[world].reshape(R * m, n)  # group r*m + i

    torch.manual_seed(a.seed)
    model = MLP(dim, a.hidden, classes, a.activation) if a.model == "mlp" else LeNet5(classes, a.classic)
    init = model.init()
    if a.init:
        flat = torch.from_numpy(np.load(a.init).astype(np.float32))
        sizes = [int(np.prod(s)) for s in model.shapes]
        if flat.numel() != sum(sizes):
            raise SystemExit(f"--init has {flat.numel()} values, the model {sum(sizes)}")
        init = [c.reshape(s).clone() for c, s in zip(torch.split(flat, sizes), model.shapes)]
    # w_0 is public and the same for every run.
    w = [t.unsqueeze(0).repeat(R, *([1] * t.dim())).clone() for t in init]

    gen = torch.Generator().manual_seed(a.seed * 1_000_003 + 17)
    cps = sorted({int(c) for c in a.checkpoints.split(",") if c}) or [0, a.rounds]
    os.makedirs(a.out, exist_ok=True)
    rows = ["file,world,pair,round,client,canary"]

    def save(tag, t, client, tensors):
        for r in range(R):
            wn = "C" if r % 2 == 0 else "Cprime"
            f = f"p{r // 2:05d}_{wn}_r{t:04d}{tag}.safetensors"
            save_safetensors(os.path.join(a.out, f), {nm: v[r] for nm, v in zip(model.names, tensors)})
            # fedaudit's canary replaces a sample of C: C' holds it.
            rows.append(f"{f},{wn},{r // 2},{t},{client},{'true' if r % 2 else 'false'}")

    fixed_noise = None
    if 0 in cps:
        save("", 0, "", w)
    for t in range(a.rounds):
        # Every client of every replica starts from w_t: group r*m + i.
        local = [v.repeat_interleave(m, dim=0).clone() for v in w]
        for _ in range(a.local_steps):
            ps = [v.clone().requires_grad_(True) for v in local]
            logits = model.forward(ps, Xg)
            # Mean over each client's samples, summed over groups: each group gets the gradient
            # of its own mean loss.
            loss = F.cross_entropy(logits.reshape(-1, classes), Yg.reshape(-1), reduction="none").reshape(R * m, n).mean(1).sum()
            grads = torch.autograd.grad(loss, ps)
            if a.bug != "no-clip":
                norm = torch.sqrt(sum((g.reshape(R * m, -1) ** 2).sum(1) for g in grads))
                scale = 1.0 / torch.clamp(norm / a.clip, min=1.0)
            else:
                scale = torch.ones(R * m)
            local = [v - a.lr * g * scale.reshape(-1, *([1] * (g.dim() - 1))) for v, g in zip(local, grads)]
        # Noise on each upload, shared by both worlds of a pair (the coupling).
        if a.bug == "reuse-noise" and fixed_noise is not None:
            noise = fixed_noise
        else:
            noise = [torch.randn((P, m) + tuple(v.shape[1:]), generator=gen).repeat_interleave(2, dim=0) for v in local]
            fixed_noise = noise
        uploads = [v.reshape(R, m, *v.shape[1:]) + a.sigma * z for v, z in zip(local, noise)]
        w = [u.mean(1) for u in uploads]
        if t + 1 in cps:
            save("", t + 1, "", w)
            if a.uploads >= 0:
                save(f"_client{a.uploads}", t + 1, a.uploads, [u[:, a.uploads] for u in uploads])
    with open(os.path.join(a.out, "manifest.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
