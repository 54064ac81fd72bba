package audit

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"
)

// FuzzAnalyze feeds arbitrary float64 scores (8 bytes each, little-endian; the first byte
// says how many go to world C) to Analyze with every method. Errors are fine; panics, bounds
// outside their ranges and results that cannot be written as JSON are not.
func FuzzAnalyze(f *testing.F) {
	enc := func(split byte, vals ...float64) []byte {
		b := []byte{split}
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	f.Add(enc(2, 1, 2, 0, 1))
	f.Add(enc(1, 0, 0))
	f.Add(enc(3, 5, 5, 5, 5, 5, 5))
	f.Add(enc(2, -math.MaxFloat64, math.Nextafter(math.MaxFloat64, 0), 1e-310, -0.0))
	f.Add(enc(1, math.NaN(), 1))
	f.Add(enc(4, 1, 2, 3, 4, 1.5, 2.5, 3.5, 4.5, 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 || len(data) > 1+8*4096 {
			return
		}
		var vals []float64
		for b := data[1:]; len(b) >= 8; b = b[8:] {
			vals = append(vals, math.Float64frombits(binary.LittleEndian.Uint64(b)))
		}
		k := min(int(data[0]), len(vals))
		c, cp := vals[:k], vals[k:]
		for _, m := range ThresholdMethods {
			res, err := Analyze(c, cp, Options{Method: m, Delta: 1e-5, Seed: 1})
			if err != nil {
				continue
			}
			if !(res.MuLower >= 0) || math.IsInf(res.MuLower, 0) || !(res.EpsLower >= 0) || math.IsInf(res.EpsLower, 0) {
				t.Fatalf("%s: bounds mu %v eps %v", m, res.MuLower, res.EpsLower)
			}
			if !(res.AUC >= 0 && res.AUC <= 1) || !(res.MuEstimate >= 0) || math.IsInf(res.MuEstimate, 0) {
				t.Fatalf("%s: AUC %v estimate %v", m, res.AUC, res.MuEstimate)
			}
			if _, err := json.Marshal(res); err != nil {
				t.Fatalf("%s: JSON: %v", m, err)
			}
		}
	})
}
