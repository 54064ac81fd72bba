package train

import "math"

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

// hiddenStepper is implemented by backends with a fused kernel for the deferred clipped step
// of an MLP with one hidden layer (MLP.deferredStep): the operations of the op-by-op path per
// replica in one task, with the replica's activations in cache.
type hiddenStepper interface {
	hiddenStep(a *hiddenStepArgs)
}

// hiddenStepArgs: for every batch element (replica) r, pre (B x H) holds x W_0^T; the step
// adds the low-rank correction gram prev and the bias, computes the loss gradient with
// respect to every parameter, clips the whole gradient to v (the first weight matrix's part
// from the Gram matrix gx of the minibatch), updates b1, W2, b2 in params (FedProx: towards
// anchor first) and writes u = -eta c delta, delta the gradient with respect to pre.
type hiddenStepArgs struct {
	act                 Activation
	pre, params, anchor Mat
	gram, prev          Mat // the correction: pre += gram prev, then prev *= 1 - eta alpha
	labels, gx, u       Mat
	b1, w2, b2, h, cls  int // offsets of b1, W2, b2 in a parameter row; hidden width; classes
	eta, v, alpha       float32
}

// hiddenScratch is one worker's memory for hiddenStep.
type hiddenScratch struct {
	post, delta, e, dl, z, w2t, grad []float32
	lg, ex                           []float64
}

func (s *hiddenScratch) grow(b, h, cls, cpad int) {
	if len(s.post) < b*h || len(s.dl) < b*cls || len(s.z) < b*cpad || len(s.w2t) < h*cpad || len(s.grad) < h+cls*h+cls {
		s.post, s.delta, s.e = make([]float32, b*h), make([]float32, b*h), make([]float32, b*h)
		s.dl, s.z, s.w2t = make([]float32, b*cls), make([]float32, b*cpad), make([]float32, h*cpad)
		s.grad = make([]float32, h+cls*h+cls)
		s.lg, s.ex = make([]float64, cpad), make([]float64, cpad) // zero beyond cls, never written
	}
}

// hiddenJob runs hiddenStep, one task per replica.
type hiddenJob struct {
	be *CPU
	a  *hiddenStepArgs
}

func (c *CPU) hiddenStep(a *hiddenStepArgs) {
	j := &c.hidden
	j.be, j.a = c, a
	c.pool.doSized(j, a.pre.Batch, a.pre.Batch*a.pre.Rows*a.h*a.cls*8)
	j.a = nil
}

func (j *hiddenJob) run(r, worker int) {
	a := j.a
	B, H, C := a.pre.Rows, a.h, a.cls
	cpad := (C + 15) &^ 15 // the logits' row, padded for the SIMD product
	s := &j.be.scratch[worker].hidden
	s.grow(B, H, C, cpad)
	pre := data(a.pre.Buf)[a.pre.Off+r*a.pre.BatchStride:]
	prow := data(a.params.Buf)[a.params.Off+r*a.params.BatchStride:]
	b1 := prow[a.b1 : a.b1+H]
	w2 := prow[a.w2 : a.w2+C*H]
	b2 := prow[a.b2 : a.b2+C]
	labels := data(a.labels.Buf)[a.labels.Off:]
	post, delta, dl := s.post[:B*H], s.delta[:B*H], s.dl[:B*C]
	grad := s.grad[:H+C*H+C]
	gb1, gw2, gb2 := grad[:H], grad[H:H+C*H], grad[H+C*H:]
	e := s.e[:B*H]
	if kp := a.prev.Rows; kp > 0 {
		prev := data(a.prev.Buf)[a.prev.Off+r*a.prev.BatchStride:]
		mulSmall(B, kp, H, data(a.gram.Buf)[a.gram.Off:], a.gram.Stride, 1, prev, a.prev.Stride, e, H)
		for i := 0; i < B; i++ {
			subScaled(-1, e[i*H:(i+1)*H], pre[i*a.pre.Stride:][:H])
		}
		if a.alpha != 0 {
			for i := 0; i < kp; i++ {
				row := prev[i*a.prev.Stride:][:H]
				scaleTo(1-a.eta*a.alpha, row, row)
			}
		}
	}
	// Forward: post = act(pre + b1); logits z = post W2^T + b2 (W2^T padded with zero columns).
	for i := 0; i < B; i++ {
		p := pre[i*a.pre.Stride:][:H]
		subScaled(-1, b1, p)
		activate(a.act, p, post[i*H:(i+1)*H])
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
	// dl = (softmax - onehot) / B, as SoftmaxXent computes it.
	scale := 1 / float32(B)
	clear(gb2)
	for i := 0; i < B; i++ {
		y := int(labels[i*a.labels.Stride])
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
		expSlice(lg, ex)
		var sum float64
		for _, v := range ex[:C] {
			sum += v
		}
		lse := float64(mx) + math.Log(sum)
		for c, v := range z {
			lg[c] = float64(v) - lse
		}
		expSlice(lg, ex)
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
	// Backward: delta = (dl W2) act'(pre), gW2 = dl^T post, gb1 = column sums of delta.
	mulSmall(B, C, H, dl, C, 1, w2, H, delta, H)
	mulSmall(C, B, H, dl, 1, C, post, H, gw2, H)
	clear(gb1)
	for i := 0; i < B; i++ {
		di := delta[i*H : (i+1)*H]
		activateGrad(a.act, pre[i*a.pre.Stride:][:H], post[i*H:(i+1)*H], di)
		subScaled(-1, di, gb1)
	}
	coef := float32(1)
	if a.v > 0 {
		// ||delta^T x||_F^2 = <delta, gx delta>, gx = x x^T
		mulSmall(B, B, H, data(a.gx.Buf)[a.gx.Off:], a.gx.Stride, 1, delta, H, e, H)
		var ghost float64
		for i := 0; i < B; i++ {
			ghost += float64(dot32(delta[i*H:(i+1)*H], e[i*H:(i+1)*H]))
		}
		nn := math.Sqrt(ghost + sumSq(grad))
		switch {
		case nn > float64(a.v):
			coef = float32(float64(a.v) / nn)
		case math.IsNaN(nn):
			coef = float32(math.NaN())
		}
	}
	rest := prow[a.b1 : a.b1+len(grad)]
	if a.alpha != 0 {
		an := data(a.anchor.Buf)[a.anchor.Off+r*a.anchor.BatchStride+a.b1:][:len(rest)]
		ea := a.eta * a.alpha
		for k := range rest {
			rest[k] = ea*an[k] + (1-ea)*rest[k]
		}
	}
	subScaled(a.eta*coef, grad, rest)
	u := data(a.u.Buf)[a.u.Off+r*a.u.BatchStride:]
	for i := 0; i < B; i++ {
		scaleTo(-a.eta*coef, delta[i*H:(i+1)*H], u[i*a.u.Stride:][:H])
	}
}
