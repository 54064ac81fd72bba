package hostmodel

import "math"

// Work evaluates an MLP (softmax regression included) with the host model's parameter
// layout in preallocated buffers: the loss gradient in w and the second-order products that
// invgrad's unrolled steps need, exactly, by reverse mode over a forward-mode (tangent) pass.
// It is not safe for concurrent use.
type Work struct {
	m *Model
	// a[l] is layer l's input (a[0] = x), z[l] its pre-activation; ad and zd their tangents.
	a, z, ad, zd [][]float64
	// Adjoints of a, z, ad and zd in the reverse pass.
	abar, zbar, adbar, zdbar [][]float64
	p                        []float64
}

// NewWork returns the workspace of m, a flat model with a softmax over classes (not a CNN,
// not the quadratic model).
func NewWork(m *Model) *Work {
	L := m.layers()
	w := &Work{m: m}
	for _, bufs := range []*[][]float64{&w.a, &w.ad, &w.abar, &w.adbar} {
		*bufs = make([][]float64, L)
		for l := range *bufs {
			(*bufs)[l] = make([]float64, m.sizes[l])
		}
	}
	for _, bufs := range []*[][]float64{&w.z, &w.zd, &w.zbar, &w.zdbar} {
		*bufs = make([][]float64, L)
		for l := range *bufs {
			(*bufs)[l] = make([]float64, m.sizes[l+1])
		}
	}
	w.p = make([]float64, m.sizes[L])
	return w
}

// activation2 returns the first and second derivatives of the activation at pre-activation v
// with activation value h.
func (m *Model) activation2(v, h float64) (d1, d2 float64) {
	switch m.act {
	case "softplus":
		s := 1 / (1 + math.Exp(-v))
		return s, s * (1 - s)
	case "relu":
		if v <= 0 {
			return 0, 0
		}
		return 1, 0
	}
	return 1 - h*h, -2 * h * (1 - h*h)
}

// Forward evaluates the network at (w, x) and the softmax of its logits.
func (wk *Work) Forward(w, x []float64) {
	m := wk.m
	L := m.layers()
	copy(wk.a[0], x)
	for l := 0; l < L; l++ {
		nin := m.sizes[l]
		in, pre := wk.a[l], wk.z[l]
		for o := range pre {
			row := w[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			s := w[m.boff[l]+o]
			for i, v := range row {
				s += v * in[i]
			}
			pre[o] = s
		}
		if l+1 < L {
			for o, v := range pre {
				wk.a[l+1][o] = m.activate(v)
			}
		}
	}
	mx := math.Inf(-1)
	for _, v := range wk.z[L-1] {
		mx = math.Max(mx, v)
	}
	var s float64
	for j, v := range wk.z[L-1] {
		wk.p[j] = math.Exp(v - mx)
		s += wk.p[j]
	}
	for j := range wk.p {
		wk.p[j] /= s
	}
}

// Gradient stores the gradient in w of the cross-entropy of label y in g, after Forward.
func (wk *Work) Gradient(w []float64, y int, g []float64) {
	m := wk.m
	L := m.layers()
	delta := wk.zbar[L-1]
	copy(delta, wk.p)
	delta[y]--
	for l := L - 1; l >= 0; l-- {
		nin := m.sizes[l]
		in := wk.a[l]
		for o, dv := range delta {
			gr := g[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			for i, v := range in {
				gr[i] = dv * v
			}
			g[m.boff[l]+o] = dv
		}
		if l == 0 {
			break
		}
		prev := wk.zbar[l-1]
		clear(prev)
		for o, dv := range delta {
			row := w[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			for i, v := range row {
				prev[i] += dv * v
			}
		}
		for i := range prev {
			prev[i] *= m.activateGrad(wk.z[l-1][i], wk.a[l][i])
		}
		delta = prev
	}
}

// HessianVector stores H_ww v in hw and H_xw v in hx, the gradients in w and in x of
// s(w, x) = <v, grad_w loss(w; x, y)>, after Forward at (w, x). It pushes the tangent of the
// forward pass in direction v (in w) to get s = <p - e_y, dz_L>, then runs reverse mode through
// both the primal and the tangent pass.
func (wk *Work) HessianVector(w []float64, y int, v, hw, hx []float64) {
	m := wk.m
	L := m.layers()
	// Tangent pass: ad_0 = 0, dz_l = V_l a_l + W_l ad_l + c_l, ad_{l+1} = act'(z_l) dz_l.
	clear(wk.ad[0])
	for l := 0; l < L; l++ {
		nin := m.sizes[l]
		in, din, dz := wk.a[l], wk.ad[l], wk.zd[l]
		for o := range dz {
			row := w[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			vrow := v[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			s := v[m.boff[l]+o]
			for i := range row {
				s += vrow[i]*in[i] + row[i]*din[i]
			}
			dz[o] = s
		}
		if l+1 < L {
			for o, dv := range dz {
				d1, _ := m.activation2(wk.z[l][o], wk.a[l+1][o])
				wk.ad[l+1][o] = d1 * dv
			}
		}
	}
	// Reverse pass. s = <p - e_y, dz_L>: its adjoint in dz_L is p - e_y, in z_L the softmax
	// Jacobian (diag p - p p^T) applied to dz_L.
	zL, dzL := wk.zbar[L-1], wk.zdbar[L-1]
	var pd float64
	for j, pj := range wk.p {
		pd += pj * wk.zd[L-1][j]
	}
	for j, pj := range wk.p {
		dzL[j] = pj
		zL[j] = pj * (wk.zd[L-1][j] - pd)
	}
	dzL[y]--
	for l := L - 1; l >= 0; l-- {
		nin := m.sizes[l]
		in, din := wk.a[l], wk.ad[l]
		zb, zdb := wk.zbar[l], wk.zdbar[l]
		ab, adb := wk.abar[l], wk.adbar[l]
		clear(ab)
		clear(adb)
		for o := range zb {
			row := w[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			vrow := v[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			gr := hw[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			zo, zdo := zb[o], zdb[o]
			for i := range row {
				gr[i] = zo*in[i] + zdo*din[i]
				ab[i] += row[i]*zo + vrow[i]*zdo
				adb[i] += row[i] * zdo
			}
			hw[m.boff[l]+o] = zo
		}
		if l == 0 {
			copy(hx, ab)
			break
		}
		pz, pzd := wk.zbar[l-1], wk.zdbar[l-1]
		for i := range pz {
			d1, d2 := m.activation2(wk.z[l-1][i], in[i])
			pz[i] = d1*ab[i] + d2*wk.zd[l-1][i]*adb[i]
			pzd[i] = d1 * adb[i]
		}
	}
}
