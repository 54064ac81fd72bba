package numfmt

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestLowerG(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		sig  int
		want string
	}{
		{0.89605, 4, "0.896"},  // %.4g prints 0.8961, above the bound
		{0.89604, 4, "0.896"},  // %.4g prints 0.896 already
		{0.896049, 4, "0.896"}, // below the half unit
		{0.99996, 4, "0.9999"}, // %.4g prints 1: one unit less keeps four digits
		{1.00004, 4, "1"},      // %.4g's 1 is below
		{12345.6, 4, "1.234e+04"},
		{-0.12345, 4, "-0.1235"}, // %.4g's -0.1234 is above a negative bound
		{-0.99996, 4, "-1"},
		{0.5, 4, "0.5"},
		{0, 4, "0"},
		{1.23456e-7, 3, "1.23e-07"},
		{math.MaxFloat64, 4, "1.797e+308"}, // %.4g's 1.798e+308 is past the largest float64
		{0.96, 0, "0.9"},                   // sig below 1 is 1
		{math.Inf(1), 4, "+Inf"},
		{math.NaN(), 4, "NaN"},
	} {
		if got := LowerG(tc.x, tc.sig); got != tc.want {
			t.Errorf("LowerG(%v, %d) = %q, want %q (%%.%dg: %q)", tc.x, tc.sig, got, tc.want, tc.sig, strconv.FormatFloat(tc.x, 'g', tc.sig, 64))
		}
	}
}

func TestLowerF(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		dec  int
		want string
	}{
		{0.89605, 4, "0.8960"}, // %.4f prints 0.8961
		{0.89604, 4, "0.8960"},
		{0.996, 2, "0.99"}, // a tightness below 1 never prints as 1.00
		{1.0, 2, "1.00"},
		{0.00006, 4, "0.0000"},
		{-0.00004, 4, "-0.0001"},
		{2.5, 0, "2"},
		{math.NaN(), 4, "NaN"},
	} {
		if got := LowerF(tc.x, tc.dec); got != tc.want {
			t.Errorf("LowerF(%v, %d) = %q, want %q", tc.x, tc.dec, got, tc.want)
		}
	}
}

// Over random values of every magnitude: the printed value is never above x, is within one
// unit of the last printed digit below it, and is what rounding to nearest prints whenever
// that is not above x.
func TestLowerNeverAbove(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		x := (rng.Float64()*2 - 1) * math.Pow(10, float64(rng.IntN(16)-8))
		sig, dec := 1+rng.IntN(6), rng.IntN(7)
		check := func(what, got, nearest string, unit float64) {
			v, err := strconv.ParseFloat(got, 64)
			if err != nil {
				t.Fatalf("%s(%v) = %q: %v", what, x, got, err)
			}
			n, _ := strconv.ParseFloat(nearest, 64)
			switch {
			case v > x:
				t.Fatalf("%s(%v) = %q, above the value", what, x, got)
			case x-v > unit*(1+1e-9):
				t.Fatalf("%s(%v) = %q, more than a unit (%g) below", what, x, got, unit)
			case n <= x && got != nearest:
				t.Fatalf("%s(%v) = %q where rounding to nearest, %q, is not above", what, x, got, nearest)
			}
		}
		mag := math.Pow(10, math.Floor(math.Log10(math.Abs(x))))
		check(fmt.Sprintf("LowerG[%d]", sig), LowerG(x, sig), strconv.FormatFloat(x, 'g', sig, 64), 10*mag*math.Pow(10, float64(-sig)))
		check(fmt.Sprintf("LowerF[%d]", dec), LowerF(x, dec), strconv.FormatFloat(x, 'f', dec, 64), math.Pow(10, float64(-dec)))
	}
}

// LowerConfidence prints the decimal a confidence stands for as itself, and rounds down what
// lies below a printed digit: a stated guarantee is never above the one computed.
func TestLowerConfidence(t *testing.T) {
	for _, c := range []struct {
		x      float64
		format byte
		prec   int
		want   string
	}{
		{100 * (1 - 0.05/40), 'g', 6, "99.875"},
		{100 * (1 - 0.05/42), 'g', 6, "99.8809"}, // 99.880952...: nearest gives 99.881
		{100 * (1 - 0.05/42), 'f', 4, "99.8809"},
		{100 * 0.95, 'f', 4, "95.0000"},
		{100 * 0.975, 'g', 6, "97.5"},
		{100 * (1 - 0.05/3), 'f', 4, "98.3333"},
		{100 * (1 - 0.1/7), 'f', 4, "98.5714"},  // 98.571428...
		{100 * (1 - 0.05/6), 'f', 4, "99.1666"}, // 99.1666...: nearest gives 99.1667
	} {
		if got := LowerConfidence(c.x, c.format, c.prec); got != c.want {
			t.Errorf("LowerConfidence(%v, %c, %d) = %q, want %q", c.x, c.format, c.prec, got, c.want)
		}
	}
}

func TestLowerShare(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want string
	}{{0.8827, "0.88"}, {0.996, "0.99"}, {0.01, "0.01"}, {0.0099999, "0.0099"}, {0.0038912, "0.0038"}, {1.2e-5, "1.2e-05"}, {0, "0.00"}, {1.5, "1.50"}} {
		if got := LowerShare(tc.x); got != tc.want {
			t.Errorf("LowerShare(%v) = %q, want %q", tc.x, got, tc.want)
		}
	}
}
