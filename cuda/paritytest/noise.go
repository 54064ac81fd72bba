package paritytest

import (
	"fmt"
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train"
)

// Known answers from Random123's kat_vectors (the three "philox4x32 10" lines), computed by
// the kernel.
func testPhiloxKnownAnswers(t *testing.T, f Factory) {
	cases := []struct{ ctr, key, want []uint32 }{
		{[]uint32{0, 0, 0, 0}, []uint32{0, 0}, []uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, []uint32{0xffffffff, 0xffffffff}, []uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, []uint32{0xa4093822, 0x299f31d0}, []uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	ops := f(t, cuda.Options{})
	defer ops.Close()
	for _, c := range cases {
		got, err := ops.PhiloxRaw(1, c.key[0], c.key[1], c.ctr[0], c.ctr[1], c.ctr[2], c.ctr[3])
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%08x", got) != fmt.Sprintf("%08x", c.want) {
			t.Errorf("philox(%08x, %08x) = %08x, want %08x", c.ctr, c.key, got, c.want)
		}
	}
}

// The kernel's Philox words, put through the Box-Muller transform of internal/philox in Go,
// must reproduce philox.AddGaussian bit for bit: this pins the counter layout (coordinate block,
// round, stream, domain), the key split of the seed and the order of the words.
func testPhiloxWordsAreTrainsStream(t *testing.T, f Factory) {
	ops := f(t, cuda.Options{Block: 5, MaxGrid: 2})
	defer ops.Close()
	const round, stream, n = 17, 0xFFFFFFFF, 37
	seed := uint64(0x0123456789abcdef)
	words, err := ops.PhiloxRaw(n, uint32(seed), uint32(seed>>32), 0, round, stream, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 4*n)
	philox.AddGaussian(want, seed, round, stream, 0, 1)
	for q := 0; q < n; q++ {
		for h := 0; h < 2; h++ {
			z0, z1 := philox.BoxMuller(words[4*q+2*h], words[4*q+2*h+1])
			for i, z := range []float64{z0, z1} {
				j := 4*q + 2*h + i
				if float32(z) != want[j] {
					t.Fatalf("coordinate %d: Box-Muller of the kernel's words gives %v, philox.AddGaussian %v", j, float32(z), want[j])
				}
			}
		}
	}
}

// AddGaussian against philox.AddGaussian with scale 1 on zeros: the uniforms are the same bits
// and the transform (philox.BoxMuller, kernels' box_muller) the same IEEE operations in the same
// order, so every value is equal bit for bit. Against the CPU backend with other scales and
// nonzero destinations: within one rounding of the scaled sum.
func testAddGaussian(t *testing.T, f Factory) {
	forEachRow(t, f, func(t *testing.T, w *twin, s shape) {
		seeds := make([]uint64, s.batch)
		scale := make([]float32, s.batch)
		for b := range seeds {
			seeds[b] = train.RunSeed(99, b/2) // pairs share a seed, as in the engine
			scale[b] = 1
		}
		z := w.buf(s.size(), func(int) float32 { return 0 })
		zm := w.mat(z, s.mat())
		w.ops.AddGaussian(zm[1], seeds, scale, 3, 5)
		_, got := w.get(z)
		m := s.mat()
		for b := 0; b < s.batch; b++ {
			want := make([]float32, s.cols)
			philox.AddGaussian(want, seeds[b], 3, 5, 0, 1)
			for j, v := range want {
				if d := ulps(v, got[m.Off+b*m.BatchStride+j]); d > 0 {
					t.Fatalf("replica %d coordinate %d: kernels %v, philox.AddGaussian %v: %d ulp", b, j, got[m.Off+b*m.BatchStride+j], v, d)
				}
			}
		}
		// Elements outside the view stay zero.
		for i, v := range got {
			inside := i >= m.Off && s.batch > 0 && (i-m.Off)%max(m.BatchStride, 1) < s.cols && (i-m.Off)/max(m.BatchStride, 1) < s.batch
			if !inside && v != 0 {
				t.Fatalf("element %d outside the view changed to %v", i, v)
			}
		}
		for b := range scale {
			scale[b] = float32(b) - 1.5
		}
		y := w.normal(s.size())
		ym := w.mat(y, s.mat())
		yc, _ := w.get(y)
		w.cpu.AddGaussian(ym[0], seeds, scale, 4, 0xFFFFFFFF)
		w.ops.AddGaussian(ym[1], seeds, scale, 4, 0xFFFFFFFF)
		// |scale z| is |ref - y before|: one ulp of the noise scaled, plus one rounding of the sum.
		w.near(y, "scaled", func(i int, ref float32) float64 {
			noise := math.Abs(float64(ref - yc[i]))
			return math.Ldexp(2*(noise+math.Abs(float64(ref))), -23) + 1e-30
		})
	})
}

// Gemm through the cuBLAS argument mapping of Ops (row-major to column-major, operands
// swapped, leading dimensions, batch strides, shared operands), against the CPU backend.
// Both sum k float32 products in different orders; each is within gamma_k sum |a||b| of the
// exact value (gamma_k about k 2^-24), so they differ by at most 2 k 2^-24 |alpha| sum|a||b|
// (+ the same rounding of beta c): the test uses k 2^-22 (|alpha| k max|a| max|b| + |beta c|).
func testGemm(t *testing.T, f Factory) {
	type gcase struct {
		ta, tb                 bool
		m, n, k, batch         int
		shareA, shareB         bool
		alpha, beta            float32
		padA, padB, padC, offC int
	}
	var cases []gcase
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			cases = append(cases,
				gcase{ta: ta, tb: tb, m: 5, n: 7, k: 16, batch: 3, alpha: 1},
				gcase{ta: ta, tb: tb, m: 1, n: 33, k: 32, batch: 2, shareA: true, alpha: -0.5, beta: 0.25, padC: 3, offC: 2},
				gcase{ta: ta, tb: tb, m: 6, n: 1, k: 72, batch: 4, shareB: true, alpha: 2, padA: 1, padB: 2},
				gcase{ta: ta, tb: tb, m: 4, n: 5, k: 70, batch: 2, alpha: 1},
				gcase{ta: ta, tb: tb, m: 3, n: 4, k: 1, batch: 1, alpha: 1, beta: 1},
			)
		}
	}
	// W1's shapes, smaller: forward X (shared) W^T, hidden delta W, weight gradient delta^T X.
	cases = append(cases,
		gcase{tb: true, m: 8, n: 6, k: 20, batch: 3, shareA: true, alpha: 1},
		gcase{m: 8, n: 20, k: 6, batch: 3, alpha: 1},
		gcase{ta: true, m: 6, n: 20, k: 8, batch: 3, shareB: true, alpha: 1},
		gcase{m: 2, n: 2, k: 2, batch: 0, alpha: 1},
	)
	// The second configuration splits every batch of more than 2 into several device calls,
	// the path batches beyond cuBLAS's limit take; the third computes in depth slices of at
	// least 2 the products whose slices outnumber their batch elements and divide the depth
	// (Options.SplitK: a cuBLAS call and a splitk_reduce per batch element; depths 16, 32, 72
	// and the W1 shapes' 20 and 8 split, 70 and 6 do not), both batch splits and slices in the
	// last, whose float32 sum of the slices stays within the same bound (k + slices roundings
	// of the same terms).
	for _, o := range []cuda.Options{{}, {MaxGemmBatch: 2}, {SplitK: true, SplitKDepth: 2}, {SplitK: true, SplitKDepth: 2, MaxGemmBatch: 2}} {
		for ci, c := range cases {
			t.Run(fmt.Sprintf("%d/maxbatch=%d/splitk=%d", ci, o.MaxGemmBatch, o.SplitKDepth), func(t *testing.T) {
				w := newTwin(t, f, o)
				ar, ac := c.m, c.k
				if c.ta {
					ar, ac = c.k, c.m
				}
				br, bc := c.k, c.n
				if c.tb {
					br, bc = c.n, c.k
				}
				as := shape{rows: ar, cols: ac, batch: c.batch, stride: ac + c.padA}
				bs := shape{rows: br, cols: bc, batch: c.batch, stride: bc + c.padB}
				if c.shareA {
					as.bstride = -1
				}
				if c.shareB {
					bs.bstride = -1
				}
				cs := shape{rows: c.m, cols: c.n, batch: c.batch, stride: c.n + c.padC, off: c.offC}
				a, b := w.normal(as.size()), w.normal(bs.size())
				cb := w.normal(cs.size())
				if c.beta == 0 {
					cb = w.buf(cs.size(), func(int) float32 { return float32(math.NaN()) })
				}
				am, bm, cm := w.mat(a, as.mat()), w.mat(b, bs.mat()), w.mat(cb, cs.mat())
				cc, _ := w.get(cb)
				w.cpu.Gemm(c.ta, c.tb, c.alpha, am[0], bm[0], c.beta, cm[0])
				w.ops.Gemm(c.ta, c.tb, c.alpha, am[1], bm[1], c.beta, cm[1])
				maxAbs := func(id int) float64 {
					h, _ := w.get(id)
					var m float64
					for _, v := range h {
						m = max(m, math.Abs(float64(v)))
					}
					return m
				}
				bound := math.Abs(float64(c.alpha)) * float64(c.k) * maxAbs(a) * maxAbs(b)
				w.near(cb, fmt.Sprintf("%+v", c), func(i int, _ float32) float64 {
					old := 0.0
					if c.beta != 0 {
						old = math.Abs(float64(c.beta) * float64(cc[i]))
					}
					return float64(c.k)*math.Ldexp(bound+old, -22) + math.Ldexp(old, -22)
				})
			})
		}
	}
}
