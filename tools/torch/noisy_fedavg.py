#!/usr/bin/env python3
"""Reference external trainer for `audit import`: Noisy-FedAvg of an MLP or LeNet-5 in PyTorch.

Needs only Debian's python3-torch and python3-numpy. It trains N coupled pairs of runs, each
pair once on world C and once on world C' with the same noise, and writes them with the recorder
(tools/recorder/fedaudit_recorder.py): every checkpoint as a safetensors file, optionally the
target client's uploads, the manifest.csv that `audit import` reads, and the declared deployment
(train.json; with --base-config the whole config.json for `audit import --config`).

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
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recorder"))
from fedaudit_recorder import Deployment, Recorder  # noqa: E402


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


def load_clients(path):
    """Both worlds' clients from the .npz of `audit datasets export`: X (2, m, n, dim) float32,
    each sample flattened in C order (as fedaudit stores it), Y (2, m, n) int64 and the number
    of classes. World 0 is C, 1 is C'."""
    npz = np.load(path)
    worlds = ("c", "cprime")
    m = 0
    while f"c/client{m}/x" in npz:
        m += 1
    if m == 0:
        raise SystemExit(f"{path}: no c/client0/x: not written by `audit datasets export`")
    xs = [[npz[f"{w}/client{i}/x"] if f"{w}/client{i}/x" in npz else None for i in range(m)] for w in worlds]
    if any(x is None or len(x) != len(xs[0][0]) for ws in xs for x in ws):
        raise SystemExit(f"{path}: this trainer needs every client in both worlds with the same number of samples")
    X = torch.stack([torch.stack([torch.from_numpy(x.reshape(len(x), -1).astype(np.float32)) for x in ws]) for ws in xs])
    Y = torch.stack([torch.stack([torch.from_numpy(npz[f"{w}/client{i}/y"].astype(np.int64)) for i in range(m)]) for w in worlds])
    return X, Y, int(npz["classes"])


def replica_groups(X, Y, pairs):
    """Every (replica, client) as one group: replica r is pair r // 2 in world r % 2, its client i
    group r*m + i. Returns the groups' samples (R*m, n, dim) and labels (R*m, n)."""
    m, n, dim = X.shape[1], X.shape[2], X.shape[3]
    R = 2 * pairs
    world = torch.arange(R) % 2
    return X[world].reshape(R * m, n, dim), Y[world].reshape(R * m, n)


def initial_model(model, init_path, replicas):
    """w_0 (the model's initialization, or the float32 .npy vector at init_path in fedaudit's
    parameter order) repeated for every replica: it is public and the same for every run."""
    init = model.init()
    if init_path:
        flat = torch.from_numpy(np.load(init_path).astype(np.float32))
        sizes = [int(np.prod(s)) for s in model.shapes]
        if flat.numel() != sum(sizes):
            raise SystemExit(f"--init has {flat.numel()} values, the model {sum(sizes)}")
        init = [c.reshape(s).clone() for c, s in zip(torch.split(flat, sizes), model.shapes)]
    return [t.unsqueeze(0).repeat(replicas, *([1] * t.dim())).clone() for t in init]


def clip_whole(clip):
    """The correct clipping: each group's whole gradient scaled to norm at most clip. A clipper
    maps the gradients (one tensor per parameter, leading dimension the groups) to one scale
    per tensor, each of shape (groups,). clip 0 disables clipping, as clip_norm 0 does in
    docs/training.md (and as the recorder declares it): it is not a bound of 0."""
    if clip == 0:
        return no_clip

    def clipper(grads):
        G = grads[0].shape[0]
        norm = torch.sqrt(sum((g.reshape(G, -1) ** 2).sum(1) for g in grads))
        scale = 1.0 / torch.clamp(norm / clip, min=1.0)
        return [scale] * len(grads)
    return clipper


def no_clip(grads):
    """A clipper that does not clip."""
    return [torch.ones(grads[0].shape[0])] * len(grads)


def local_train(model, w, Xg, Yg, classes, steps, lr, clipper):
    """Every client's local training from the replicas' global models w (leading dimension R):
    steps full-batch gradient steps of the mean softmax cross-entropy over the client's samples,
    each gradient scaled by clipper (clip_whole, no_clip, ...). Returns the local results, one
    tensor per parameter with leading dimension R*m (group r*m + i)."""
    G, n = Xg.shape[0], Xg.shape[1]
    m = G // w[0].shape[0]
    # Each replica's model repeated for its m clients (expand and copy: repeat_interleave's
    # values, without its cost on small tensors).
    local = [v.unsqueeze(1).expand(v.shape[0], m, *v.shape[1:]).reshape(G, *v.shape[1:]).clone() for v in w]
    for _ in range(steps):
        ps = [v.clone().requires_grad_(True) for v in local]
        logits = model.forward(ps, Xg)
        # Mean over each client's samples, summed over groups: each group gets the gradient of
        # its own mean loss.
        loss = F.cross_entropy(logits.reshape(-1, classes), Yg.reshape(-1), reduction="none").reshape(G, n).mean(1).sum()
        grads = torch.autograd.grad(loss, ps)
        scales = clipper(grads)
        local = [v - lr * g * s.reshape(-1, *([1] * (g.dim() - 1))) for v, g, s in zip(local, grads, scales)]
    return local


def model_config(model_kind, hidden, activation, classic):
    """The experiment config's model section of the trainer's model."""
    if model_kind == "mlp":
        return {"kind": "mlp", "hidden": [hidden], "activation": activation}
    return {"kind": "lenet5", **({"classic": True} if classic else {})}


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
    p.add_argument("--base-config", default="", help="the experiment config (YAML or JSON) the data was exported from: also write config.json")
    a = p.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

    X, Y, classes = load_clients(a.data)
    m, dim = X.shape[1], X.shape[-1]
    P, R = a.pairs, 2 * a.pairs
    Xg, Yg = replica_groups(X, Y, P)

    torch.manual_seed(a.seed)
    model = MLP(dim, a.hidden, classes, a.activation) if a.model == "mlp" else LeNet5(classes, a.classic)
    w = initial_model(model, a.init, R)

    gen = torch.Generator().manual_seed(a.seed * 1_000_003 + 17)
    cps = sorted({int(c) for c in a.checkpoints.split(",") if c}) or [0, a.rounds]
    # What the deployment declares (the bugs are what it does instead).
    dep = Deployment(model_config(a.model, a.hidden, a.activation, a.classic), a.rounds, a.local_steps, a.lr,
                     a.clip, a.sigma, checkpoints=cps, informed=a.sigma > 0)
    # Replica r is pair r // 2 in world r % 2, the recorder's replica layout.
    rec = Recorder(a.out, P, dep, target_client=a.uploads if a.uploads >= 0 else None,
                   base_config=a.base_config or None, names=model.names)
    clipper = no_clip if a.bug == "no-clip" else clip_whole(a.clip)

    fixed_noise = None
    if 0 in cps:
        rec.replicas(0, w)
    for t in range(a.rounds):
        local = local_train(model, w, Xg, Yg, classes, a.local_steps, a.lr, clipper)
        # Noise on each upload, shared by both worlds of a pair (the coupling).
        if a.bug == "reuse-noise" and fixed_noise is not None:
            noise = fixed_noise
        else:
            noise = [torch.randn((P, m) + tuple(v.shape[1:]), generator=gen).repeat_interleave(2, dim=0) for v in local]
            fixed_noise = noise
        uploads = [v.reshape(R, m, *v.shape[1:]) + a.sigma * z for v, z in zip(local, noise)]
        w = [u.mean(1) for u in uploads]
        if t + 1 in cps:
            rec.replicas(t + 1, w)
            if a.uploads >= 0:
                rec.replicas(t + 1, [u[:, a.uploads] for u in uploads], client=a.uploads, upload=True)
    rec.close()


if __name__ == "__main__":
    main()
