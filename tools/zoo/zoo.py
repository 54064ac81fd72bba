#!/usr/bin/env python3
"""The bug zoo: a PyTorch Noisy-FedAvg deployment with one flag per privacy bug shipped in the field.

Every variant trains the deployment of --config (tools/zoo/zoo.yaml by default: its train section
is what the deployment declares) on the clients of --data (the .npz `audit datasets export
--config` writes), N coupled pairs that share their noise, and records them with the recorder
(tools/recorder) into OUT/<bug>/seed<s>/: every round a checkpoint, the target client's uploads,
config.json with informed: true, so that `audit import` replays every round and `audit check`
can test the residuals. The model, data loading and local training are tools/torch's
(noisy_fedavg.py); the bugs change what a client does with its local result and what the server
does with the uploads (tools/zoo/README.md says what each models and where it was shipped):

    none                 the correct algorithm: whole-gradient clipping to V, upload + N(0, sigma^2)
    no-clip              local gradients not clipped (Opacus #664: fast clipping ignored max_grad_norm)
    clip-per-parameter   each parameter tensor clipped to V on its own (fedbiomed #1443)
    noise-twice          the upload's noise added twice, two independent draws (fedbiomed #1443)
    variance-as-std      sigma^2 used as the noise's standard deviation (sigma != 1)
    noise-on-average     uploads bare; the server adds N(0, sigma^2 / m) once to the average
    reuse-noise          each client's noise drawn once and added again every round
    unnoised-bias        the biases get no noise (a parameter group left out)
    clip-after-noise     the noisy update clipped to the update bound eta K V after the noise
    passthrough          a random fraction of coordinates sent without noise (NVFlare #343)
    shared-client-noise  every client adds the same draw

    python3 tools/zoo/zoo.py --data data.npz --out snaps --bugs all --seeds 0,1,2
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "recorder"))
from fedaudit_recorder import Deployment, Recorder  # noqa: E402
from noisy_fedavg import MLP, clip_whole, initial_model, load_clients, local_train, model_config, no_clip, replica_groups  # noqa: E402

BUGS = ["none", "no-clip", "clip-per-parameter", "noise-twice", "variance-as-std", "noise-on-average",
        "reuse-noise", "unnoised-bias", "clip-after-noise", "passthrough", "shared-client-noise"]


def clip_per_tensor(clip):
    """A clipper that clips each parameter tensor to norm clip on its own: the whole gradient's
    norm is then up to sqrt(tensors) times the bound."""
    def clipper(grads):
        G = grads[0].shape[0]
        return [1.0 / torch.clamp(torch.sqrt((g.reshape(G, -1) ** 2).sum(1)) / clip, min=1.0) for g in grads]
    return clipper


def load_config(path):
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return json.loads(raw)
    except ValueError:
        import yaml  # python3-yaml comes with Debian's python3-torch
        return yaml.safe_load(raw)


def unsupported(tc, clients):
    """What the train section tc declares that the zoo does not train: it runs Noisy-FedAvg with
    full batches, every client in every round, a constant learning rate and Gaussian noise, and
    the recorder copies the config's other train fields into config.json as they are, so a
    deployment declaring anything else would be audited against an algorithm it did not run."""
    probs = []
    for k, ok, want in (("algorithm", tc.get("algorithm", "fedavg") == "fedavg", "fedavg"),
                        ("batching", tc.get("batching", "full") in ("", "full"), "full"),
                        ("schedule", tc.get("schedule", "constant") in ("", "constant"), "constant"),
                        ("schedule_table", not tc.get("schedule_table"), "none"),
                        ("mechanism", tc.get("mechanism", "gaussian") in ("", "gaussian"), "gaussian"),
                        ("participants", tc.get("participants", 0) in (0, clients), f"0 or {clients} (every client)"),
                        ("sampling_rate", tc.get("sampling_rate", 0) in (0, 1), "unset (every client)")):
        if not ok:
            probs.append(f"train.{k} is {tc[k]!r}, the zoo trains {want}")
    for k in ("canaries", "gradient_canary", "crafted_update", "pretrain"):
        if tc.get(k):
            probs.append(f"train.{k} is set, the zoo does not train it")
    return probs


def train(bug, seed, X, Y, classes, cfg, out, passthrough=0.25):
    """Trains the deployment of cfg with one bug (or none) and records it into out."""
    tc = cfg["train"]
    mc = tc["model"]
    if mc.get("kind") != "mlp" or len(mc.get("hidden", [])) != 1:
        raise SystemExit("the zoo trains an MLP with one hidden layer (train.model)")
    probs = unsupported(tc, X.shape[1])
    if probs:
        raise SystemExit("--config: " + "; ".join(probs))
    T, K, lr = tc["rounds"], tc["local_steps"], float(tc["learning_rate"])
    V, sigma = float(tc["clip_norm"]), float(tc["noise_std"])
    target = int(cfg["adjacency"]["client"])
    P, m, dim = int(cfg["pairs"]), X.shape[1], X.shape[-1]
    R = 2 * P
    Xg, Yg = replica_groups(X, Y, P)

    torch.manual_seed(seed)
    model = MLP(dim, mc["hidden"][0], classes, mc.get("activation", "tanh"))
    w = initial_model(model, "", R)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + 17)
    # What the deployment declares: the config's train section, whatever the bug does.
    dep = Deployment(model_config("mlp", mc["hidden"][0], mc.get("activation", "tanh"), False), T, K, lr, V, sigma,
                     participants=int(tc.get("participants", 0)), checkpoints=range(T + 1), informed=True)
    rec = Recorder(out, P, dep, target_client=target, base_config=cfg, names=model.names)
    clipper = {"no-clip": no_clip, "clip-per-parameter": clip_per_tensor(V)}.get(bug, clip_whole(V))

    def both_worlds(x):
        # A pair's draw for both of its replicas (world C and C'): the coupling.
        return x.unsqueeze(1).expand(P, 2, *x.shape[1:]).reshape(R, *x.shape[1:])

    def draw(per_client=True):
        # One draw per pair (and client), shared by both worlds of the pair.
        return [both_worlds(torch.randn((P, m if per_client else 1) + tuple(s), generator=gen)) for s in model.shapes]

    rec.replicas(0, w)
    fixed = None
    for t in range(T):
        local = local_train(model, w, Xg, Yg, classes, K, lr, clipper)
        local = [v.reshape(R, m, *v.shape[1:]) for v in local]  # (replica, client, ...)
        if bug == "reuse-noise":
            fixed = fixed or draw()
            z = fixed
        elif bug == "shared-client-noise":
            z = [d.expand(R, m, *d.shape[2:]) for d in draw(per_client=False)]
        else:
            z = draw()
        std = sigma * sigma if bug == "variance-as-std" else sigma
        noise = [std * zi for zi in z]
        if bug == "noise-twice":
            noise = [n + sigma * z2 for n, z2 in zip(noise, draw())]
        if bug == "unnoised-bias":
            noise = [torch.zeros_like(n) if name.endswith("bias") else n for n, name in zip(noise, model.names)]
        if bug == "passthrough":
            # Each coordinate of each upload passes through without noise with probability
            # `passthrough` (NVFlare's SVT filter left the coordinates it neither noised nor zeroed).
            keep = [both_worlds(torch.rand((P, m) + tuple(s), generator=gen) >= passthrough) for s in model.shapes]
            noise = [n * k for n, k in zip(noise, keep)]
        w_rep = [v.unsqueeze(1) for v in w]
        if bug == "noise-on-average":
            uploads = local
            server = draw(per_client=False)
            w = [u.mean(1) + sigma / np.sqrt(m) * s[:, 0] for u, s in zip(uploads, server)]
        else:
            if bug == "clip-after-noise":
                # The update clipped to its bound eta K V after the noise was added: the noise is
                # shrunk with it.
                d = [u - w0 + n for u, w0, n in zip(local, w_rep, noise)]
                norm = torch.sqrt(sum((di.reshape(R, m, -1) ** 2).sum(2) for di in d))
                scale = 1.0 / torch.clamp(norm / (lr * K * V), min=1.0)
                uploads = [w0 + di * scale.reshape(R, m, *([1] * (di.dim() - 2))) for w0, di in zip(w_rep, d)]
            else:
                uploads = [u + n for u, n in zip(local, noise)]
            w = [u.mean(1) for u in uploads]
        rec.replicas(t + 1, w)
        rec.replicas(t + 1, [u[:, target] for u in uploads], client=target, upload=True)
    return rec.close()


def parse_seeds(s):
    out = []
    for part in s.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="the .npz of `audit datasets export --config CONFIG`")
    p.add_argument("--config", default=os.path.join(HERE, "zoo.yaml"), help="the deployment (YAML or JSON)")
    p.add_argument("--out", required=True, help="writes OUT/<bug>/seed<s>/ (manifest.csv, config.json, snapshots)")
    p.add_argument("--bugs", default="all", help="comma-separated variants, or all: " + ", ".join(BUGS))
    p.add_argument("--seeds", default="0", help="seeds: 0,1,2 or 0-99")
    p.add_argument("--pairs", type=int, default=0, help="coupled pairs (default: the config's)")
    p.add_argument("--passthrough", type=float, default=0.25, help="passthrough's fraction of coordinates without noise")
    a = p.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    bugs = BUGS if a.bugs == "all" else a.bugs.split(",")
    for b in bugs:
        if b not in BUGS:
            raise SystemExit(f"--bugs: unknown variant {b!r}: want one of {', '.join(BUGS)}")
    cfg = load_config(a.config)
    if a.pairs:
        cfg["pairs"] = a.pairs
    X, Y, classes = load_clients(a.data)
    for seed in parse_seeds(a.seeds):
        for b in bugs:
            train(b, seed, X, Y, classes, cfg, os.path.join(a.out, b, f"seed{seed}"), a.passthrough)
    print(f"wrote {len(bugs)} variants x {len(parse_seeds(a.seeds))} seeds into {a.out}")


if __name__ == "__main__":
    main()
