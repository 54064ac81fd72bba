// Package numfmt formats certified lower bounds for people: never above the number they print.
//
// A certified lower bound rounded to nearest can print above the bound it reports (mu_lower
// 0.89605 as "0.8961"), and a table that a paper quotes would then state a bound the audit did
// not certify. LowerG and LowerF round toward minus infinity at the printed precision instead,
// so the printed value is always at most the bound: still a valid lower bound, conservative by
// less than one unit of its last digit. Ratios of a lower bound to an exact claim (tightness)
// are lower bounds too: a tightness of 0.996 prints as 0.99 at two decimals, not as 1.00 beside
// a verdict that found no violation.
package numfmt

import (
	"math"
	"strconv"
)

// LowerG formats x with sig significant digits (1 to 17), as %.{sig}g does, but rounded toward
// minus infinity: the printed value, read back as a float64, is never above x. (A decimal that
// reads back as x itself, "0.3" for the double nearest 0.3, may exceed that double by less than
// its last bit: far below any digit printed.) NaN and infinities print as strconv does.
func LowerG(x float64, sig int) string {
	sig = min(max(sig, 1), 17)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'g', sig, 64)
	}
	s := strconv.FormatFloat(x, 'g', sig, 64)
	// A value rounded past math.MaxFloat64 reads back with a range error: round it down too.
	if v, err := strconv.ParseFloat(s, 64); err == nil && v <= x {
		return s
	}
	// x rounded up: take one unit off the last of its sig digits, d.ddd...e±XX.
	e := strconv.FormatFloat(x, 'e', sig-1, 64)
	mant, exp := parseE(e)
	mant-- // never below 10^(sig-1) - 1 in magnitude for a positive x rounded up
	if x > 0 && mant < pow10(sig-1) {
		// 1.000e+00 less a unit is 9.999e-01, still sig digits.
		mant, exp = pow10(sig)-1, exp-1
	}
	if x < 0 && -mant >= pow10(sig) {
		// -9.999e-01 less a unit is -1.000e+00.
		mant, exp = -pow10(sig-1), exp+1
	}
	v, _ := strconv.ParseFloat(strconv.FormatInt(mant, 10)+"e"+strconv.Itoa(exp-sig+1), 64)
	return strconv.FormatFloat(v, 'g', sig, 64)
}

// LowerF formats x with dec decimals (at least 0), as %.{dec}f does, but rounded toward minus
// infinity, in the sense of LowerG.
func LowerF(x float64, dec int) string {
	dec = max(dec, 0)
	s := strconv.FormatFloat(x, 'f', dec, 64)
	if v, err := strconv.ParseFloat(s, 64); err != nil || v <= x || math.IsNaN(x) || math.IsInf(x, 0) {
		return s
	}
	// x rounded up by less than half a unit of the last decimal: one unit less is below x.
	v, _ := strconv.ParseFloat(s, 64)
	return strconv.FormatFloat(v-math.Pow10(-dec), 'f', dec, 64)
}

// parseE splits strconv's 'e' form, [-]d.ddde±XX, into its digits as an integer (with the
// sign) and its exponent.
func parseE(s string) (mant int64, exp int) {
	i := len(s) - 1
	for s[i] != 'e' {
		i--
	}
	exp, _ = strconv.Atoi(s[i+1:])
	digits := make([]byte, 0, i)
	for _, c := range []byte(s[:i]) {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	mant, _ = strconv.ParseInt(string(digits), 10, 64)
	return mant, exp
}

func pow10(n int) int64 {
	p := int64(1)
	for ; n > 0; n-- {
		p *= 10
	}
	return p
}

// LowerConfidence formats a confidence level (or a percentage of one) rounded down at the
// printed precision, as LowerF (format 'f', prec decimals) or LowerG ('g', prec significant
// digits) do, after nudging x up by 1e-12 of itself. A confidence is the float64 value of an
// exact rational (0.95, 1 - 0.05/40), computed with a relative error of a few 1e-16: rounded
// down as it is, 99.875 stored as 99.87499999999999 would print "99.8749". The nudge lets the
// decimal the level stands for print as itself, while a level that lies below a printed
// digit by more than 1e-12 of itself (99.880952... at 6 digits: "99.8809", not "99.881")
// still rounds down.
func LowerConfidence(x float64, format byte, prec int) string {
	x += 1e-12 * math.Abs(x)
	if format == 'g' {
		return LowerG(x, prec)
	}
	return LowerF(x, prec)
}

// LowerShare formats a ratio of a lower bound to a claim (a tightness) for a sentence: two
// decimals, rounded down as LowerF does, or below 0.01 two significant digits (0.0038 rather
// than a "0.00 of the composition bound" that reads as no privacy loss at all).
func LowerShare(x float64) string {
	if x > 0 && x < 0.01 {
		return LowerG(x, 2)
	}
	return LowerF(x, 2)
}
