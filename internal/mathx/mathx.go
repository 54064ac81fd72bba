// Package mathx holds float64 functions where the standard library's are wrong at the edges of
// the range: what the accountants need to stay on the safe side for any input they accept.
package mathx

import "math"

// smallestNormal is the least positive normal float64, 2^-1022.
const smallestNormal = 0x1p-1022

// Log is the natural logarithm, also right for subnormal x. Go's math.Log on amd64 takes
// subnormals for about 2.2e-308: math.Log(1e-320) is -709.09 where the truth is -736.83, so an
// epsilon computed at such a delta came out too small (golang/go#56600). Frexp normalizes the
// mantissa first.
func Log(x float64) float64 {
	if x > 0 && x < smallestNormal {
		frac, exp := math.Frexp(x)
		return math.Log(frac) + float64(exp)*math.Ln2
	}
	return math.Log(x)
}
