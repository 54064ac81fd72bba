package simd

// Max4 writes into out[i] the first maximum of a[i], b[i], c[i], d[i] in that order, as
// found by comparing each value with > to the best so far (a NaN wins only as a[i]; -0 and +0
// tie): a 2x2 max-pooling window over a run of samples (internal/imgops' rule).
func Max4(a, b, c, d, out []float32) {
	n := len(out)
	a, b, c, d = a[:n], b[:n], c[:n], d[:n]
	if k := n &^ 7; useAVX2 && k > 0 {
		max4AVX2(k, &a[0], &b[0], &c[0], &d[0], &out[0])
		a, b, c, d, out = a[k:], b[k:], c[k:], d[k:], out[k:]
	}
	max4Go(a, b, c, d, out)
}

func max4Go(a, b, c, d, out []float32) {
	for i := range out {
		m := a[i]
		if b[i] > m {
			m = b[i]
		}
		if c[i] > m {
			m = c[i]
		}
		if d[i] > m {
			m = d[i]
		}
		out[i] = m
	}
}

// Max4Grad is Max4's gradient: each g[i] goes, added to zero (a -0 arrives as +0), to the
// window's winner among da, db, dc, dd; the others get 0.
func Max4Grad(a, b, c, d, g, da, db, dc, dd []float32) {
	n := len(g)
	a, b, c, d, da, db, dc, dd = a[:n], b[:n], c[:n], d[:n], da[:n], db[:n], dc[:n], dd[:n]
	if k := n &^ 7; useAVX2 && k > 0 {
		max4GradAVX2(k, &a[0], &b[0], &c[0], &d[0], &g[0], &da[0], &db[0], &dc[0], &dd[0])
		a, b, c, d, g = a[k:], b[k:], c[k:], d[k:], g[k:]
		da, db, dc, dd = da[k:], db[k:], dc[k:], dd[k:]
	}
	max4GradGo(a, b, c, d, g, da, db, dc, dd)
}

func max4GradGo(a, b, c, d, g, da, db, dc, dd []float32) {
	for i, v := range g {
		m, at := a[i], 0
		if b[i] > m {
			m, at = b[i], 1
		}
		if c[i] > m {
			m, at = c[i], 2
		}
		if d[i] > m {
			at = 3
		}
		var z [4]float32
		z[at] += v
		da[i], db[i], dc[i], dd[i] = z[0], z[1], z[2], z[3]
	}
}
