#!/usr/bin/env python3
"""Reference external trainer for `audit import`: Noisy-FedAvg of an MLP in PyTorch.

Needs only Debian's python3-torch and python3-numpy. It trains N coupled pairs of runs, each
pair once on world C and once on world C' with the same noise, and writes every checkpoint as a
safetensors file (written by hand: 8-byte header length, JSON header, raw float32) plus a
manifest.csv that `audit import` reads.

The algorithm is the one of docs/training.md ("Algorithms as implemented"), full batches:

    every client i starts from w_t
    for k = 0..K-1:
        g = gradient of the mean softmax cross-entropy over the client's samples
        g <- g / max(1, ||g|| / V)                (the whole parameter vector)
        w <- w - eta g
    upload_i = w_{i,K} + sigma z_i                (Gaussian noise on each upload)
    w_{t+1} = (1/m) sum_i upload_i

Planted bugs (--bug): "reuse-noise" draws each client's z_i once and adds the same vector every
round; "no-clip" skips the clipping. Both break the privacy claim of the correct algorithm.

The data comes from --data, an .npz with x_<world>_<client> (float32, n x dim) and
y_<world>_<client> (int labels), world 0 = C, 1 = C' (fedaudit writes it from the experiment
config, so both trainers see the same clients and the same canary).
"""
import argparse
import json
import os
import struct

import numpy as np
import torch


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


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--pairs", type=int, required=True)
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--activation", default="tanh", choices=["tanh", "relu", "softplus"])
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument("--local-steps", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--clip", type=float, required=True)
    p.add_argument("--sigma", type=float, required=True)
    p.add_argument("--checkpoints", default="", help="comma-separated rounds (default: 0 and the last)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bug", default="none", choices=["none", "reuse-noise", "no-clip"])
    a = p.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

    npz = np.load(a.data)
    m = 0
    while f"x_0_{m}" in npz:
        m += 1
    # X[w]: (m, n, dim) per world; every client holds the same number of samples.
    X = torch.stack([torch.stack([torch.from_numpy(npz[f"x_{w}_{i}"].astype(np.float32)) for i in range(m)]) for w in range(2)])
    Y = torch.stack([torch.stack([torch.from_numpy(npz[f"y_{w}_{i}"].astype(np.int64)) for i in range(m)]) for w in range(2)])
    classes = int(Y.max()) + 1 if "classes" not in npz else int(npz["classes"])
    dim = X.shape[-1]
    P, R = a.pairs, 2 * a.pairs
    world = torch.arange(R) % 2  # replica r is pair r // 2, world r % 2
    Xr, Yr = X[world], Y[world]  # (R, m, n, dim), (R, m, n)
    act = {"tanh": torch.tanh, "relu": torch.relu, "softplus": torch.nn.functional.softplus}[a.activation]

    # w_0 is public and the same for every run: nn.Linear's default initialization.
    torch.manual_seed(a.seed)
    fc1, fc2 = torch.nn.Linear(dim, a.hidden), torch.nn.Linear(a.hidden, classes)
    init = [fc1.weight.data, fc1.bias.data, fc2.weight.data, fc2.bias.data]
    names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    w = [t.unsqueeze(0).repeat(R, *([1] * t.dim())).clone() for t in init]

    gen = torch.Generator().manual_seed(a.seed * 1_000_003 + 17)
    cps = sorted({int(c) for c in a.checkpoints.split(",") if c}) or [0, a.rounds]
    os.makedirs(a.out, exist_ok=True)
    rows = ["file,world,pair,round,canary"]

    def checkpoint(t):
        for r in range(R):
            f = f"p{r // 2:05d}_{'C' if r % 2 == 0 else 'Cprime'}_r{t:04d}.safetensors"
            save_safetensors(os.path.join(a.out, f), {n: v[r] for n, v in zip(names, w)})
            # fedaudit's canary replaces a sample of C: C' holds it.
            rows.append(f"{f},{'C' if r % 2 == 0 else 'Cprime'},{r // 2},{t},{'true' if r % 2 else 'false'}")

    fixed_noise = None
    if 0 in cps:
        checkpoint(0)
    for t in range(a.rounds):
        # Every client of every replica starts from w_t: shape (R, m, ...).
        local = [v.unsqueeze(1).repeat(1, m, *([1] * (v.dim() - 1))).clone() for v in w]
        for _ in range(a.local_steps):
            ps = [v.clone().requires_grad_(True) for v in local]
            W1, b1, W2, b2 = ps
            h = act(torch.einsum("rmnd,rmhd->rmnh", Xr, W1) + b1.unsqueeze(2))
            logits = torch.einsum("rmnh,rmch->rmnc", h, W2) + b2.unsqueeze(2)
            # Mean over each client's samples, summed over (replica, client): each (r, i) gets the
            # gradient of its own mean loss.
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, classes), Yr.reshape(-1), reduction="none")
            loss = loss.reshape(R, m, -1).mean(-1).sum()
            grads = torch.autograd.grad(loss, ps)
            if a.bug != "no-clip":
                norm = torch.sqrt(sum((g.reshape(R, m, -1) ** 2).sum(-1) for g in grads))
                scale = 1.0 / torch.clamp(norm / a.clip, min=1.0)
            else:
                scale = torch.ones(R, m)
            local = [v - a.lr * g * scale.reshape(R, m, *([1] * (g.dim() - 2))) for v, g in zip(local, grads)]
        # Noise on each upload, shared by both worlds of a pair (the coupling).
        if a.bug == "reuse-noise" and fixed_noise is not None:
            noise = fixed_noise
        else:
            noise = [torch.randn((P, m) + tuple(v.shape[2:]), generator=gen).repeat_interleave(2, dim=0) for v in local]
            fixed_noise = noise
        w = [(v + a.sigma * z).mean(1) for v, z in zip(local, noise)]
        if t + 1 in cps:
            checkpoint(t + 1)
    with open(os.path.join(a.out, "manifest.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
