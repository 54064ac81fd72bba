package train

import (
	"math"
	"slices"
	"testing"
)

// Known answers from Random123's tests/kat_vectors (Salmon et al. 2011), the three
// "philox4x32 10" lines: counter (4 words), key (2 words), expected output (4 words).
func TestPhilox4x32KnownAnswers(t *testing.T) {
	cases := []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		if got := philox4x32(c.ctr, c.key); got != c.want {
			t.Errorf("philox4x32(%08x, %08x) = %08x, want %08x", c.ctr, c.key, got, c.want)
		}
	}
}

// The Gaussian stream must be standard normal: mean, variance and a Kolmogorov-Smirnov test
// against Phi on 1e5 draws. Tolerances: mean within 5 standard errors (5/sqrt(n)), variance
// within 5 standard errors (5 sqrt(2/n)), KS statistic below the 0.1% critical value
// 1.95/sqrt(n), so a correct generator fails with probability about 1e-3.
func TestGaussianDistribution(t *testing.T) {
	const n = 100000
	z := make([]float32, n)
	AddGaussianHost(z, 12345, 7, 3, 0, 1)
	var s, ss float64
	for _, v := range z {
		s += float64(v)
		ss += float64(v) * float64(v)
	}
	mean := s / n
	vr := ss/n - mean*mean
	if math.Abs(mean) > 5/math.Sqrt(n) {
		t.Errorf("mean %g, want 0 within %g", mean, 5/math.Sqrt(n))
	}
	if math.Abs(vr-1) > 5*math.Sqrt(2.0/n) {
		t.Errorf("variance %g, want 1 within %g", vr, 5*math.Sqrt(2.0/n))
	}
	x := make([]float64, n)
	for i, v := range z {
		x[i] = float64(v)
	}
	slices.Sort(x)
	var ks float64
	for i, v := range x {
		f := 0.5 * math.Erfc(-v/math.Sqrt2)
		ks = max(ks, math.Abs(f-float64(i)/n), math.Abs(f-float64(i+1)/n))
	}
	if crit := 1.95 / math.Sqrt(n); ks > crit {
		t.Errorf("KS statistic %g above the 0.1%% critical value %g", ks, crit)
	}
}

// A window of the stream equals the same coordinates of the full stream, so the noise does not
// depend on how coordinates are split into blocks; streams of other rounds differ.
func TestGaussianAddressing(t *testing.T) {
	full := make([]float32, 1000)
	AddGaussianHost(full, 99, 2, 5, 0, 1)
	part := make([]float32, 301)
	AddGaussianHost(part, 99, 2, 5, 123, 1)
	if !slices.Equal(part, full[123:424]) {
		t.Error("window of the stream differs from the full stream")
	}
	other := make([]float32, 1000)
	AddGaussianHost(other, 99, 3, 5, 0, 1)
	if slices.Equal(other, full) {
		t.Error("rounds 2 and 3 gave the same noise")
	}
	be := NewCPU(3)
	defer be.Close()
	buf := be.Alloc(3 * 10001)
	seeds := []uint64{99, 99, 7}
	be.AddGaussian(Mat{Buf: buf, Rows: 1, Cols: 10001, Stride: 10001, Batch: 3, BatchStride: 10001}, seeds, []float32{1, 2, 1}, 2, 5)
	got := data(buf)
	if !slices.Equal(got[:1000], full) {
		t.Error("backend noise differs from AddGaussianHost")
	}
	for i := 0; i < 10001; i++ {
		if got[10001+i] != 2*got[i] {
			t.Fatalf("element with equal seed and scale 2: coordinate %d is %g, want %g", i, got[10001+i], 2*got[i])
		}
	}
}

func TestRunSeedDistinct(t *testing.T) {
	seen := map[uint64]int{}
	for p := 0; p < 10000; p++ {
		s := RunSeed(42, p)
		if q, ok := seen[s]; ok {
			t.Fatalf("pairs %d and %d share seed %x", q, p, s)
		}
		seen[s] = p
	}
	if RunSeed(42, 0) == RunSeed(43, 0) {
		t.Error("master seeds 42 and 43 give pair 0 the same seed")
	}
}
