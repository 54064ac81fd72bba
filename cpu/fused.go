package cpu

import (
	"math"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu/internal/simd"
)

// dotLanes is the portable form of dot32's SIMD sum (n a multiple of 16): lane l accumulates
// x_i y_i for i = l mod 16, and the lanes are added pairwise (l + l+8, l + l+4, l + l+2,
// 0 + 1), as dotAVX2 does (which fuses each multiply-add).
func dotLanes(x, y []float32) float32 {
	var a [16]float32
	y = y[:len(x)]
	for i := 0; i+16 <= len(x); i += 16 {
		for l := range a {
			a[l] += x[i+l] * y[i+l]
		}
	}
	for w := 8; w >= 1; w /= 2 {
		for l := 0; l < w; l++ {
			a[l] += a[l+w]
		}
	}
	return a[0]
}

// mulSmallGo is mulSmall without SIMD (the same sums in the same order, each product rounded
// before it is added).
func mulSmallGo(rows, k, cols int, a []float32, ars, acs int, v []float32, vs int, out []float32, os int) {
	for i := 0; i < rows; i++ {
		o := out[i*os : i*os+cols]
		clear(o)
		for c := 0; c < k; c++ {
			w := a[i*ars+c*acs]
			for j, x := range v[c*vs : c*vs+cols] {
				o[j] += w * x
			}
		}
	}
}

// hiddenScratch is one worker's memory for hiddenStep.
type hiddenScratch struct {
	post, delta, e, dl, z, w2t, grad []float32
	lg, ex                           []float64
}

func (s *hiddenScratch) grow(b, h, cls, cpad int) {
	if len(s.post) < b*h || len(s.dl) < b*cls || len(s.z) < b*cpad || len(s.w2t) < h*cpad || len(s.grad) < h+cls*h+cls || len(s.lg) < cpad {
		s.post, s.delta, s.e = make([]float32, b*h), make([]float32, b*h), make([]float32, b*h)
		s.dl, s.z, s.w2t = make([]float32, b*cls), make([]float32, b*cpad), make([]float32, h*cpad)
		s.grad = make([]float32, h+cls*h+cls)
		s.lg, s.ex = make([]float64, cpad), make([]float64, cpad) // zero beyond cls, never written
	}
}

// hiddenJob runs hiddenStep, one task per replica.
type hiddenJob struct {
	be *Backend
	a  *compute.HiddenStepArgs
}

// HiddenStep implements compute.HiddenStepper.
func (c *Backend) HiddenStep(a *compute.HiddenStepArgs) {
	j := &c.hidden
	j.be, j.a = c, a
	n := a.Pre.Batch * a.GroupCount()
	c.pool.doSized(j, n, n*a.Pre.Rows*a.H*a.Cls*8)
	j.a = nil
}

// run is the step of element b: replica b, or of a grouped step replica b % Pre.Batch of
// group b / Pre.Batch, computed as that group alone.
func (j *hiddenJob) run(b, worker int) {
	a := j.a
	if a.Groups > 1 {
		n := a.Pre.Batch
		g := a.Group(b / n)
		j.step(&g, b%n, worker)
		return
	}
	j.step(a, b, worker)
}

func (j *hiddenJob) step(a *compute.HiddenStepArgs, r, worker int) {
	B, H, C := a.Pre.Rows, a.H, a.Cls
	cpad := (C + 15) &^ 15 // the logits' row, padded for the SIMD product
	s := &j.be.scratch[worker].hidden
	s.grow(B, H, C, cpad)
	pre := data(a.Pre.Buf)[a.Pre.Off+r*a.Pre.BatchStride:]
	prow := data(a.Params.Buf)[a.Params.Off+r*a.Params.BatchStride:]
	b1 := prow[a.B1 : a.B1+H]
	w2 := prow[a.W2 : a.W2+C*H]
	b2 := prow[a.B2 : a.B2+C]
	post, delta, dl := s.post[:B*H], s.delta[:B*H], s.dl[:B*C]
	grad := s.grad[:H+C*H+C]
	gb1, gw2, gb2 := grad[:H], grad[H:H+C*H], grad[H+C*H:]
	e := s.e[:B*H]
	addPrev(a, r, pre, e)
	// Forward: post = act(pre + b1); logits z = post W2^T + b2 (W2^T padded with zero columns).
	for i := 0; i < B; i++ {
		p := pre[i*a.Pre.Stride:][:H]
		subScaled(-1, b1, p)
		activate(a.Act, p, post[i*H:(i+1)*H])
	}
	w2t := s.w2t[:H*cpad]
	clear(w2t)
	for c := 0; c < C; c++ {
		for k, v := range w2[c*H : (c+1)*H] {
			w2t[k*cpad+c] = v
		}
	}
	zs := s.z[:B*cpad]
	mulSmall(B, H, cpad, post, H, 1, w2t, cpad, zs, cpad)
	softmaxXent(a, s, zs, b2, dl, gb2, B, C, cpad)
	// Backward: delta = (dl W2) act'(pre), gW2 = dl^T post, gb1 = column sums of delta.
	mulSmall(B, C, H, dl, C, 1, w2, H, delta, H)
	mulSmall(C, B, H, dl, 1, C, post, H, gw2, H)
	clear(gb1)
	for i := 0; i < B; i++ {
		di := delta[i*H : (i+1)*H]
		activateGrad(a.Act, pre[i*a.Pre.Stride:][:H], post[i*H:(i+1)*H], di)
		subScaled(-1, di, gb1)
	}
	coef := clipCoef(a, delta, e, grad)
	rest := prow[a.B1 : a.B1+len(grad)]
	if a.Alpha != 0 {
		an := data(a.Anchor.Buf)[a.Anchor.Off+r*a.Anchor.BatchStride+a.B1:][:len(rest)]
		ea := a.Eta * a.Alpha
		for k := range rest {
			rest[k] = ea*an[k] + (1-ea)*rest[k]
		}
	}
	subScaled(a.Eta*coef, grad, rest)
	u := data(a.U.Buf)[a.U.Off+r*a.U.BatchStride:]
	for i := 0; i < B; i++ {
		scaleTo(-a.Eta*coef, delta[i*H:(i+1)*H], u[i*a.U.Stride:][:H])
	}
}

// addPrev adds the low-rank correction Gram Prev to replica r's pre-activations (pre, B x H:
// x W_0^T, to which the deferred first-layer updates in Prev have not been applied), then
// scales Prev by 1 - Eta Alpha (FedProx's pull towards the anchor); e is scratch of B x H.
// It is its own piece because it brings pre up to the current first layer, which the
// forward pass then reads as plain pre-activations; without Prev rows it does nothing.
func addPrev(a *compute.HiddenStepArgs, r int, pre, e []float32) {
	B, H := a.Pre.Rows, a.H
	kp := a.Prev.Rows
	if kp <= 0 {
		return
	}
	prev := data(a.Prev.Buf)[a.Prev.Off+r*a.Prev.BatchStride:]
	mulSmall(B, kp, H, data(a.Gram.Buf)[a.Gram.Off:], a.Gram.Stride, 1, prev, a.Prev.Stride, e, H)
	for i := 0; i < B; i++ {
		subScaled(-1, e[i*H:(i+1)*H], pre[i*a.Pre.Stride:][:H])
	}
	if a.Alpha != 0 {
		for i := 0; i < kp; i++ {
			row := prev[i*a.Prev.Stride:][:H]
			scaleTo(1-a.Eta*a.Alpha, row, row)
		}
	}
}

// softmaxXent adds the bias b2 to the logits zs (B rows of stride cpad, C classes) and sets
// dl = (softmax - onehot) / B, as SoftmaxXent computes it, and gb2 to dl's column sums. It is
// its own piece because it is the loss's gradient at the logits, computed per sample in
// float64 from the labels, between the forward and the backward products.
func softmaxXent(a *compute.HiddenStepArgs, s *hiddenScratch, zs, b2, dl, gb2 []float32, B, C, cpad int) {
	labels := data(a.Labels.Buf)[a.Labels.Off:]
	scale := 1 / float32(B)
	clear(gb2)
	for i := 0; i < B; i++ {
		y := int(labels[i*a.Labels.Stride])
		z := zs[i*cpad : i*cpad+C]
		mx := float32(math.Inf(-1))
		for c := range z {
			z[c] += b2[c]
			mx = max(mx, z[c])
		}
		// The exponentials run over a multiple of four (SIMD, no scalar tail); the padding
		// lanes hold 0 and are not read.
		c4 := (C + 3) &^ 3
		lg, ex := s.lg[:c4], s.ex[:c4]
		for c, v := range z {
			lg[c] = float64(v - mx)
		}
		simd.ExpSlice(lg, ex)
		var sum float64
		for _, v := range ex[:C] {
			sum += v
		}
		lse := float64(mx) + math.Log(sum)
		for c, v := range z {
			lg[c] = float64(v) - lse
		}
		simd.ExpSlice(lg, ex)
		d := dl[i*C : (i+1)*C]
		for c := range d {
			p := float32(ex[c])
			if c == y {
				p--
			}
			d[c] = scale * p
			gb2[c] += d[c]
		}
	}
}

// clipCoef returns the factor that clips the replica's whole gradient to norm V: the first
// layer's part from the ghost norm ||delta^T x||_F^2 = <delta, gx delta> (gx = x x^T, e is
// scratch of B x H), the rest (grad) directly; 1 without clipping (V <= 0) or within V, NaN
// for a NaN norm. It is its own piece because it is the per-example clipping of DP-SGD,
// apart from the gradient it scales.
func clipCoef(a *compute.HiddenStepArgs, delta, e, grad []float32) float32 {
	B, H := a.Pre.Rows, a.H
	coef := float32(1)
	if a.V > 0 {
		mulSmall(B, B, H, data(a.GX.Buf)[a.GX.Off:], a.GX.Stride, 1, delta, H, e, H)
		var ghost float64
		for i := 0; i < B; i++ {
			ghost += float64(dot32(delta[i*H:(i+1)*H], e[i*H:(i+1)*H]))
		}
		nn := math.Sqrt(ghost + sumSq(grad))
		switch {
		case nn > float64(a.V):
			coef = float32(float64(a.V) / nn)
		case math.IsNaN(nn):
			coef = float32(math.NaN())
		}
	}
	return coef
}
