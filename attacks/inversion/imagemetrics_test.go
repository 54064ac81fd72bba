package inversion

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// lcgImage rebuilds the inputs of testdata/ssim_reference.py from integer arithmetic, bit for bit:
// kind "lcg" is s_{k+1} = (1103515245 s_k + 12345) mod 2^31 scaled by 2^-31 from the seed,
// "pattern" ((i^2 + 3j + 5c + seed) mod 17) / 16, "noisy" base + 0.25 (u - 0.5) clipped to
// [0, 1] with u the lcg of the seed, "affine" 0.5 base + 0.25.
func lcgImage(kind string, seed int, img Image, base []float64) []float64 {
	n := img.C * img.H * img.W
	lcg := func() []float64 {
		out := make([]float64, n)
		s := uint64(seed)
		for k := range out {
			s = (1103515245*s + 12345) % (1 << 31)
			out[k] = float64(s) / float64(1<<31)
		}
		return out
	}
	switch kind {
	case "lcg":
		return lcg()
	case "pattern":
		out := make([]float64, n)
		for c := 0; c < img.C; c++ {
			for i := 0; i < img.H; i++ {
				for j := 0; j < img.W; j++ {
					out[(c*img.H+i)*img.W+j] = float64((i*i+3*j+5*c+seed)%17) / 16
				}
			}
		}
		return out
	case "noisy":
		u := lcg()
		for k := range u {
			u[k] = math.Min(math.Max(base[k]+0.25*(u[k]-0.5), 0), 1)
		}
		return u
	case "affine":
		out := make([]float64, n)
		for k, v := range base {
			out[k] = 0.5*v + 0.25
		}
		return out
	}
	panic("unknown kind " + kind)
}

// TestSSIMAgainstNumpy compares ssim with an independent numpy implementation
// (testdata/ssim_reference.py, run with Debian's python3-numpy 1.24: the full 2-D window over
// sliding_window_view, where ssim filters separably) on five fixed inputs: one and several
// channels, square and oblong, one window only (11 x 11), values near 1, 0.8 and below 0. The
// two compute the same sums in different orders, so they agree to rounding: 1e-12 absolute.
func TestSSIMAgainstNumpy(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "ssim_reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []struct {
			Name    string
			C, H, W int
			A, B    [2]any
			SSIM    string
		}
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) != 5 {
		t.Fatalf("%d reference cases, want 5", len(ref.Cases))
	}
	for _, tc := range ref.Cases {
		img := Image{tc.C, tc.H, tc.W}
		a := lcgImage(tc.A[0].(string), int(tc.A[1].(float64)), img, nil)
		b := lcgImage(tc.B[0].(string), int(tc.B[1].(float64)), img, a)
		want, err := strconv.ParseFloat(tc.SSIM, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := ssim(a, b, img, 1); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: ssim %.15g, numpy %.15g", tc.Name, got, want)
		}
	}
}

// TestSSIMClosedForm checks cases with a known answer. Identical images give 1 (every window's
// two factors are equal fractions). Two constant images a and b have no variance, so every
// window gives (2ab + C1) / (a^2 + b^2 + C1): for an image shifted by a constant c that is
// 1 - c^2 / (a^2 + (a+c)^2 + C1), with C1 = 1e-4 for L = 1, and with L = 255 C1 = 6.5025.
// Symmetry in the two images, and NaN for images smaller than the window and flat vectors.
func TestSSIMClosedForm(t *testing.T) {
	img := Image{2, 13, 12}
	n := img.C * img.H * img.W
	x := lcgImage("lcg", 9, img, nil)
	if got := ssim(x, x, img, 1); math.Abs(got-1) > 1e-14 {
		t.Errorf("identical images: %v, want 1", got)
	}
	constant := func(v float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	for _, tc := range []struct{ a, c, L, c1 float64 }{
		{0.3, 0.2, 1, 1e-4}, {0.5, -0.5, 1, 1e-4}, {0, 1, 1, 1e-4}, {100, 20, 255, 6.5025},
	} {
		want := 1 - tc.c*tc.c/(tc.a*tc.a+(tc.a+tc.c)*(tc.a+tc.c)+tc.c1)
		if got := ssim(constant(tc.a), constant(tc.a+tc.c), img, tc.L); math.Abs(got-want) > 1e-12 {
			t.Errorf("constants %v and %v (L = %v): %.15g, want %.15g", tc.a, tc.a+tc.c, tc.L, got, want)
		}
	}
	y := lcgImage("noisy", 4, img, x)
	if a, b := ssim(x, y, img, 1), ssim(y, x, img, 1); math.Abs(a-b) > 1e-14 || !(a < 1) {
		t.Errorf("ssim(x, y) = %v, ssim(y, x) = %v: want equal and below 1", a, b)
	}
	for _, small := range []Image{{1, 10, 20}, {1, 20, 10}, {}} {
		m := max(small.C*small.H*small.W, 4)
		if got := ssim(make([]float64, m), make([]float64, m), small, 1); !math.IsNaN(got) {
			t.Errorf("image %v: ssim %v, want NaN", small, got)
		}
	}
}

// TestSSIMCameraReference checks ssim against the published reference value of scikit-image's
// test suite (test_gaussian_structural_similarity_vs_IPOL): 0.357959091663361, the MSSIM that the
// IPOL article's imdiff program (Gaussian window, population moments) gives for scikit-image's
// 512 x 512 camera image against a noisy copy (numpy seed 5, noise of standard deviation 20,
// clipped, cast to uint8), on the 0..255 scale (L = 255). scikit-image holds its own to 3
// decimals of it; ours lands within 6e-6 (imdiff's arithmetic is not Wang's MATLAB code's line
// for line), and the test allows 1e-4, which a window sigma of 1.4 instead of 1.5 exceeds
// (by 4e-3: checked by breaking it once). The image cannot be committed here, so the test needs
// FEDAUDIT_SSIM_CAMERA, a directory with camera.u8 and camera_noisy.u8 (raw 512 x 512 bytes)
// made by testdata/ssim_camera.py from scikit-image's camera.png; without it, it is skipped.
func TestSSIMCameraReference(t *testing.T) {
	dir := os.Getenv("FEDAUDIT_SSIM_CAMERA")
	if dir == "" {
		t.Skip("FEDAUDIT_SSIM_CAMERA not set (see testdata/ssim_camera.py)")
	}
	read := func(name string) []float64 {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 512*512 {
			t.Fatalf("%s: %d bytes, want 512 x 512", name, len(b))
		}
		out := make([]float64, len(b))
		for i, v := range b {
			out[i] = float64(v)
		}
		return out
	}
	cam, noisy := read("camera.u8"), read("camera_noisy.u8")
	got := ssim(cam, noisy, Image{1, 512, 512}, 255)
	t.Logf("MSSIM %.15g, IPOL reference 0.357959091663361", got)
	if math.Abs(got-0.357959091663361) > 1e-4 {
		t.Errorf("MSSIM %.15g differs from the reference 0.357959091663361 by more than 1e-4", got)
	}
}

func TestPSNR(t *testing.T) {
	// 10 log10(1 / 0.01) = 20 dB; peak 255 with MSE 65.025 gives 10 log10(1000) = 30 dB.
	for _, tc := range []struct{ mse, peak, want float64 }{
		{0.01, 1, 20}, {1, 1, 0}, {65.025, 255, 30}, {0, 1, math.Inf(1)},
	} {
		if got := psnr(tc.mse, tc.peak); math.Abs(got-tc.want) > 1e-12 && got != tc.want {
			t.Errorf("psnr(%v, %v) = %v, want %v", tc.mse, tc.peak, got, tc.want)
		}
	}
}

// The metrics take the data range as 1: for features outside [0, 1] they measured an exact
// reconstruction (clipped to the box) at 0.6 dB, and the noise sweep's table published such
// numbers. They are NaN there now. The flat-image baseline is the PSNR of the sample's mean
// brightness everywhere: 10 log10(1/variance).
func TestMetricsOutsideTheBoxAndFlatBaseline(t *testing.T) {
	img := Image{C: 1, H: 2, W: 2}
	ref := []float64{0, 0.5, 1, 0.5} // mean 0.5, variance 0.125
	got := Metrics(ref, ref, img)
	if len(got) != 5 || got[0] != 0 || !math.IsInf(got[1], 1) || got[3] != 0 {
		t.Fatalf("exact reconstruction: %v, want MSE 0, PSNR +Inf, L2 0", got)
	}
	if want := 10 * math.Log10(1/0.125); math.Abs(got[4]-want) > 1e-12 {
		t.Errorf("flat-image PSNR %v, want %v", got[4], want)
	}
	flat := []float64{0.5, 0.5, 0.5, 0.5}
	if m := Metrics(flat, ref, img); math.Abs(m[1]-m[4]) > 1e-12 {
		t.Errorf("the flat image's PSNR %v differs from the baseline %v", m[1], m[4])
	}
	for _, out := range [][]float64{{-2, 0.5, 1, 0.5}, {0, 0.5, 2.75, 0.5}, {0, math.NaN(), 1, 0.5}} {
		for i, v := range Metrics(ref, out, img) {
			if !math.IsNaN(v) {
				t.Errorf("sample %v outside [0, 1]: metric %d is %v, want NaN", out, i, v)
			}
		}
	}
}
