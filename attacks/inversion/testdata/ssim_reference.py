#!/usr/bin/python3
"""Independent reference values for attacks' SSIM (TestSSIMAgainstNumpy).

Run with Debian's python3-numpy: /usr/bin/python3 attacks/inversion/testdata/ssim_reference.py > attacks/inversion/testdata/ssim_reference.json

SSIM of Wang, Bovik, Sheikh and Simoncelli (2004), computed here differently from the Go code:
the full 2-D 11x11 Gaussian window (sigma 1.5, normalized to unit sum) is applied to every
"valid" placement at once through numpy's sliding_window_view and einsum (the Go code filters
separably, row pass then column pass). Population moments under the window weights,
C1 = (0.01 L)^2, C2 = (0.03 L)^2, L = 1; the mean over the windows of each channel, then over
the channels. The inputs are generated from integer arithmetic only (an LCG and modular
patterns), so Go rebuilds them bit for bit.
"""
import json

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def lcg(seed, n):
    s = seed
    out = np.empty(n)
    for k in range(n):
        s = (1103515245 * s + 12345) % (1 << 31)
        out[k] = s / float(1 << 31)
    return out


def generate(kind, c, h, w, seed, base=None):
    n = c * h * w
    if kind == "lcg":
        return lcg(seed, n).reshape(c, h, w)
    if kind == "pattern":
        ch, i, j = np.meshgrid(np.arange(c), np.arange(h), np.arange(w), indexing="ij")
        return ((i * i + 3 * j + 5 * ch + seed) % 17) / 16.0
    if kind == "noisy":
        u = lcg(seed, n).reshape(c, h, w)
        return np.clip(base + 0.25 * (u - 0.5), 0.0, 1.0)
    if kind == "affine":
        return 0.5 * base + 0.25
    raise ValueError(kind)


def window():
    k = np.arange(11) - 5.0
    g2 = np.exp(-(k[:, None] ** 2 + k[None, :] ** 2) / (2 * 1.5 ** 2))
    return g2 / g2.sum()


def ssim(a, b, L=1.0):
    c1, c2 = (0.01 * L) ** 2, (0.03 * L) ** 2
    wgt = window()
    per_channel = []
    for ch in range(a.shape[0]):
        wa = sliding_window_view(a[ch], (11, 11))
        wb = sliding_window_view(b[ch], (11, 11))
        mom = lambda v: np.einsum("ijkl,kl->ij", v, wgt)
        ma, mb = mom(wa), mom(wb)
        va = mom(wa * wa) - ma * ma
        vb = mom(wb * wb) - mb * mb
        cov = mom(wa * wb) - ma * mb
        s = (2 * ma * mb + c1) * (2 * cov + c2) / ((ma * ma + mb * mb + c1) * (va + vb + c2))
        per_channel.append(s.mean())
    return float(np.mean(per_channel))


CASES = [
    # name, channels, height, width, (kind, seed) of a, (kind, seed) of b
    ("lcg-vs-noisy-16x16", 1, 16, 16, ("lcg", 7), ("noisy", 11)),
    ("pattern-vs-lcg-3x12x14", 3, 12, 14, ("pattern", 0), ("lcg", 3)),
    ("pattern-vs-affine-28x28", 1, 28, 28, ("pattern", 2), ("affine", 0)),
    ("lcg-vs-lcg-11x11", 1, 11, 11, ("lcg", 1), ("lcg", 2)),
    ("pattern-vs-noisy-2x20x11", 2, 20, 11, ("pattern", 4), ("noisy", 5)),
]


def main():
    out = []
    for name, c, h, w, (ka, sa), (kb, sb) in CASES:
        a = generate(ka, c, h, w, sa)
        b = generate(kb, c, h, w, sb, base=a)
        out.append({"name": name, "c": c, "h": h, "w": w, "a": [ka, sa], "b": [kb, sb],
                    "ssim": repr(ssim(a, b))})
    print(json.dumps({"numpy": np.__version__, "cases": out}, indent=1))


if __name__ == "__main__":
    main()
