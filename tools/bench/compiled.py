#!/usr/bin/python3
"""torch.compile forms of the W1 and W2 PyTorch references on a CUDA device (issue 26).

Issue 26 compares fedaudit's GPU backend with the best PyTorch form of each workload, the
forms under torch.compile included (mode "reduce-overhead", which replays CUDA graphs, and
"max-autotune"). The reference scripts (w1.py, w1_cuda.py, w2.py, w2_cuda.py: the folder given
by --ref) are not changed; this script imports them:

- W2: w2_cuda.py's per-step functions (step_batched, step_im2col: forward and loss of every
  replica's minibatch) are replaced by their compiled forms; the training loop, data, noise,
  warm-up and clock are w2_cuda.py's own.
- W1: w1_cuda.py's training loop has no step function to compile, so run_w1 below is its loop
  with the body of a local step moved into w1_step (the same operations, written as a
  function of the parameters that returns the new ones instead of updating them in place, so
  that a compiled graph has no mutated inputs), and a round's K local steps into w1_local,
  the function that is compiled (one CUDA graph a round). `--check` runs both, uncompiled, beside
  w1_cuda.run_batched on the same inputs (any device; the CPU here) and exits 1 if they differ
  by more than 1e-5.

The warm-up run at each size (the references' own) also compiles, so the timed rounds
replay compiled code. Output: the references' RESULT lines with compile=MODE in front of
impl=, so that a sitting's log says which form each rate is.

    python3 compiled.py --ref DIR --workload w2 --mode reduce-overhead -- --impl batched --replicas 64,1024 --rounds 5
    python3 compiled.py --ref DIR --workload w1 --mode max-autotune -- --impl batched_ghost --replicas 64,4096 --rounds 10
    python3 compiled.py --ref DIR --check
"""
import argparse
import contextlib
import io
import sys
import time

import torch


def load(ref):
    sys.path.insert(0, ref)
    import w1
    import w1_cuda
    import w2_cuda
    return w1, w1_cuda, w2_cuda


def w1_step(w1, W1, b1, W2, b2, x, yoh, ghost):
    """One clipped local step of every (world, client, replica) model of W1's batched form.

    W1 is [n, Rh*HID, DIN] (client n's replicas side by side), b1 [n, 1, Rh*HID], W2
    [n*Rh, NC, HID], b2 [n*Rh, 1, NC]; x [n, B, DIN] and the one-hot labels yoh [n, 1, B, NC]
    are client n's minibatch. Returns the four parameters after the step.
    """
    HID, DIN, NC, B, ETA, V = w1.HID, w1.DIN, w1.NC, w1.B, w1.ETA, w1.V
    n, Rh = x.shape[0], W1.shape[1] // HID
    a1 = torch.baddbmm(b1, x, W1.transpose(1, 2))
    h = torch.tanh(a1).view(n, B, Rh, HID).transpose(1, 2).reshape(n * Rh, B, HID)
    z = torch.baddbmm(b2, h, W2.transpose(1, 2))
    dz = (torch.softmax(z, -1).view(n, Rh, B, NC) - yoh).view(n * Rh, B, NC) / B
    gW2 = torch.bmm(dz.transpose(1, 2), h)
    gb2 = dz.sum(1)
    da = torch.bmm(dz, W2) * (1 - h * h)
    gb1 = da.sum(1)
    daT = da.view(n, Rh, B, HID).transpose(2, 3).reshape(n, Rh * HID, B)
    if ghost:
        gx = torch.bmm(x, x.transpose(1, 2)).view(n, 1, B * B)
        gd = torch.bmm(da, da.transpose(1, 2)).view(n, Rh, B * B)
        sq1 = (gd * gx).sum(-1).view(-1)
    else:
        gW1 = torch.bmm(daT, x)
        sq1 = torch.linalg.vector_norm(gW1.view(n * Rh, HID * DIN), dim=1) ** 2
    sq = sq1 + (gW2 ** 2).sum((1, 2)) + (gb2 ** 2).sum(1) + (gb1 ** 2).sum(1)
    c = -ETA / torch.clamp(sq.sqrt() / V, min=1.0)
    if ghost:
        W1 = torch.baddbmm(W1, (daT.view(n * Rh, HID, B) * c.view(-1, 1, 1)).view(n, Rh * HID, B), x)
    else:
        W1 = W1 + (gW1.view(n * Rh, HID, DIN) * c.view(-1, 1, 1)).view(n, Rh * HID, DIN)
    b1 = b1 + (gb1 * c.view(-1, 1)).view(n, 1, Rh * HID)
    W2 = W2 + gW2 * c.view(-1, 1, 1)
    b2 = b2 + (gb2 * c.view(-1, 1)).view(n * Rh, 1, NC)
    return W1, b1, W2, b2


def w1_local(w1, W1, b1, W2, b2, X, Y, idx, ghost):
    """The K local steps of one round (w1_step K times), the minibatches gathered inside:
    idx [M, K, B] is the round's minibatch order. Compiled in reduce-overhead mode, one call
    is one CUDA graph whose outputs are read before the next replay overwrites them. Compiled
    step by step instead, each step's outputs would be the next step's inputs, which
    torch.compile's CUDA graphs refuse ("accessing tensor output of CUDAGraphs that has been
    overwritten by a subsequent run": the sitting of 2026-11-27)."""
    M, B, DIN, NC = w1.M, w1.B, w1.DIN, w1.NC
    n = 2 * M
    ar = torch.arange(M, device=X.device)[:, None]
    eye = torch.eye(NC, device=X.device)
    for k in range(w1.K):
        i = idx[:, k]
        x = X[:, ar, i].view(n, B, DIN)
        yoh = eye[Y[:, ar, i]].view(n, 1, B, NC)
        W1, b1, W2, b2 = w1_step(w1, W1, b1, W2, b2, x, yoh, ghost)
    return W1, b1, W2, b2


def run_w1(w1, step, R, T, X, Y, order, w0, ghost, dev, round_fn=None):
    """w1_cuda.run_batched's training with its local step computed by step (w1_step or its
    compiled form), or, with round_fn, its K local steps of a round by round_fn (w1_local or its
    compiled form): the same data, minibatches and noise stream, the same result."""
    M, HID, DIN, NC, B, SIGMA = w1.M, w1.HID, w1.DIN, w1.NC, w1.B, w1.SIGMA
    Rh, n = R // 2, 2 * M
    gen = torch.Generator(device=dev).manual_seed(w1.NOISE_SEED)
    G = [p.to(dev).expand((2, Rh) + p.shape).clone() for p in w1.split(w0)]
    nz = torch.empty(2, Rh, M, w1.D, device=dev)
    ar, eye = torch.arange(M, device=dev)[:, None], torch.eye(NC, device=dev)
    for t in range(T):
        L = [Gp.unsqueeze(1).expand((2, M) + Gp.shape[1:]).contiguous() for Gp in G]
        W1, b1 = L[0].view(n, Rh * HID, DIN), L[1].view(n, 1, Rh * HID)
        W2, b2 = L[2].view(n * Rh, NC, HID), L[3].view(n * Rh, 1, NC)
        if round_fn is not None:
            W1, b1, W2, b2 = round_fn(W1, b1, W2, b2, X, Y, order[t])
        else:
            for k in range(w1.K):
                idx = order[t, :, k]
                x = X[:, ar, idx].view(n, B, DIN)
                yoh = eye[Y[:, ar, idx]].view(n, 1, B, NC)
                W1, b1, W2, b2 = step(W1, b1, W2, b2, x, yoh)
        nz.normal_(generator=gen)
        local = [W1.view(L[0].shape), b1.view(L[1].shape), W2.view(L[2].shape), b2.view(L[3].shape)]
        G = [(Lp + SIGMA * Np.transpose(1, 2)).mean(1) for Lp, Np in zip(local, w1.split(nz))]
    return torch.cat([G[j].reshape(R, -1) for j in range(4)], 1)


def check(w1, w1_cuda):
    """w1_step's loop against w1_cuda.run_batched on the CPU, both forms: exit 1 if they differ."""
    dev = torch.device("cpu")
    X, Y = w1.make_data()
    T = 2
    order, w0 = w1.make_order(T), w1.init_params()
    worst = 0.0
    for ghost in (False, True):
        ref = w1_cuda.run_batched(4, T, X, Y, order, w0, ghost, dev)
        by_step = run_w1(w1, lambda *a: w1_step(w1, *a, ghost), 4, T, X, Y, order, w0, ghost, dev)
        by_round = run_w1(w1, None, 4, T, X, Y, order, w0, ghost, dev,
                          round_fn=lambda *a: w1_local(w1, *a, ghost))
        for form, got in (("step", by_step), ("round", by_round)):
            diff = float((ref - got).abs().max() / ref.abs().max())
            print(f"CHECK w1 ghost={ghost} form={form} largest difference {diff:.2e} of the largest parameter")
            worst = max(worst, diff)
    # float32 sums in the same order up to the update's form (a + b c instead of addcmul_):
    # a few ulps of each parameter per step, 10 steps here.
    if worst > 1e-5:
        print("CHECK FAILED: a step or round form does not reproduce w1_cuda.run_batched")
        sys.exit(1)


class Tagged(io.TextIOBase):
    """stdout with compile=MODE put in front of every RESULT line's impl=."""

    def __init__(self, out, mode):
        self.out, self.mode, self.part = out, mode, ""

    def write(self, s):
        self.part += s
        *lines, self.part = self.part.split("\n")
        for line in lines:
            self.out.write(line.replace("RESULT impl=", f"RESULT compile={self.mode} impl=", 1) + "\n")
        self.out.flush()
        return len(s)


def timed_w1(w1, w1_cuda, mode, argv):
    """w1_cuda.py's main, with run_w1 and the compiled step in place of run_batched."""
    ap = argparse.ArgumentParser(prog="compiled.py --workload w1")
    ap.add_argument("--impl", choices=["batched", "batched_ghost"], default="batched")
    ap.add_argument("--replicas", default="64,1024,4096")
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args(argv)
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    X, Y = (t.to(dev) for t in w1.make_data())
    order, w0 = w1.make_order(a.rounds).to(dev), w1.init_params()
    ghost = a.impl == "batched_ghost"
    # dynamic=False: each replica count gets its own static-shape graph (the second count would
    # otherwise recompile with symbolic shapes: another form than the first count's).
    local = torch.compile(lambda *args: w1_local(w1, *args, ghost), mode=mode, dynamic=False)
    print(f"torch {torch.__version__} device={torch.cuda.get_device_name(0)}")
    for R in (int(r) for r in a.replicas.split(",")):
        try:
            run_w1(w1, None, R, 1, X, Y, order, w0, ghost, dev, round_fn=local)  # warm-up and compilation
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            W = run_w1(w1, None, R, a.rounds, X, Y, order, w0, ghost, dev, round_fn=local)
            torch.cuda.synchronize()
            sec = time.perf_counter() - t0
            fin = bool(torch.isfinite(W).all())
            del W
            torch.cuda.empty_cache()
            print(f"RESULT impl={a.impl} device=cuda replicas={R} rounds={a.rounds} "
                  f"replica_rounds_per_s={R * a.rounds / sec:.1f} seconds={sec:.3f} finite={fin}")
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            print(f"RESULT impl={a.impl} device=cuda replicas={R} out_of_memory")
        except Exception as e:  # a form that does not compile or replay: say so, go on
            first = (str(e).splitlines() or [""])[0][:200]
            print(f"RESULT impl={a.impl} device=cuda replicas={R} error={type(e).__name__}: {first}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", required=True, help="the folder holding w1.py, w1_cuda.py, w2.py, w2_cuda.py")
    ap.add_argument("--workload", choices=["w1", "w2"], default="w2")
    ap.add_argument("--mode", choices=["default", "reduce-overhead", "max-autotune"], default="reduce-overhead")
    ap.add_argument("--check", action="store_true", help="check W1's step form against w1_cuda.run_batched (CPU) and exit")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="after --: the reference's own options")
    a = ap.parse_args()
    w1, w1_cuda, w2_cuda = load(a.ref)
    if a.check:
        check(w1, w1_cuda)
        return
    if not hasattr(torch, "compile"):
        sys.exit(f"compiled.py: torch {torch.__version__} has no torch.compile (PyTorch 2.0 or later)")
    rest = a.rest[1:] if a.rest[:1] == ["--"] else a.rest
    with contextlib.redirect_stdout(Tagged(sys.stdout, a.mode)):
        if a.workload == "w1":
            timed_w1(w1, w1_cuda, a.mode, rest)
            return
        # dynamic=False, as for W1: n (the conv groups, the batch of products) differs per count.
        w2_cuda.step_batched = torch.compile(w2_cuda.step_batched, mode=a.mode, dynamic=False)
        w2_cuda.step_im2col = torch.compile(w2_cuda.step_im2col, mode=a.mode, dynamic=False)
        sys.argv = ["w2_cuda.py"] + rest
        w2_cuda.main()


if __name__ == "__main__":
    main()
