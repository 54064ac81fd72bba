package simd

// Max4 writes into out[i] the first maximum of a[i], b[i], c[i], d[i] in that order, as
// found by comparing each value with > to the best so far (a NaN wins only as a[i]; -0 and +0
// tie): a 2x2 max-pooling window over a run of samples (internal/imgops' rule).
func Max4(a, b, c, d, out []float32) {
	n := len(out)
	a, b, c, d = a[:n], b[:n], c[:n], d[:n]
	if k := n &^ 7; useAVX2 && k > 0 {
		max4RowsAVX2(1, k, &a[0], &b[0], &c[0], &d[0], &out[0])
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
		max4GradRowsAVX2(1, k, &a[0], &b[0], &c[0], &d[0], &g[0], &da[0], &db[0], &dc[0], &dd[0])
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

// Max4Rows is Max4 over the windows of a row pair: row0 and row1 hold 2 windows pixels of n
// samples each (the top and bottom rows of the windows), out receives windows pixels; window
// w is a = row0[2wn:], b = row0[(2w+1)n:], c and d likewise in row1.
func Max4Rows(row0, row1, out []float32, windows, n int) {
	row0, row1, out = row0[:2*windows*n], row1[:2*windows*n], out[:windows*n]
	if useAVX2 && n > 0 && n%8 == 0 && windows > 0 {
		max4RowsAVX2(windows, n, &row0[0], &row0[n], &row1[0], &row1[n], &out[0])
		return
	}
	for w := 0; w < windows; w++ {
		Max4(row0[2*w*n:][:n], row0[(2*w+1)*n:][:n], row1[2*w*n:][:n], row1[(2*w+1)*n:][:n], out[w*n:][:n])
	}
}

// Max4GradRows is Max4Grad over the windows of a row pair (as Max4Rows lays them out): g
// holds windows pixels of gradient, d0 and d1 receive the gradients of row0 and row1.
func Max4GradRows(row0, row1, g, d0, d1 []float32, windows, n int) {
	m := 2 * windows * n
	row0, row1, g, d0, d1 = row0[:m], row1[:m], g[:windows*n], d0[:m], d1[:m]
	if useAVX2 && n > 0 && n%8 == 0 && windows > 0 {
		max4GradRowsAVX2(windows, n, &row0[0], &row0[n], &row1[0], &row1[n], &g[0], &d0[0], &d0[n], &d1[0], &d1[n])
		return
	}
	for w := 0; w < windows; w++ {
		a, b := 2*w*n, (2*w+1)*n
		Max4Grad(row0[a:][:n], row0[b:][:n], row1[a:][:n], row1[b:][:n], g[w*n:][:n], d0[a:][:n], d0[b:][:n], d1[a:][:n], d1[b:][:n])
	}
}
