package theory

import (
	"errors"
	"fmt"
	"math"
)

// The exact reference instance (docs/theory.md): local losses f_i(w) = (a/2)||w||^2 - <b_i, w>
// with clipping never active. Local training is then affine, the final model is exactly
// Gaussian, and its mu is known in closed form, so the trainer and the attacks can be checked
// against exact numbers. With a = -L the instance has the shape of Theorem 3a.

// QuadraticLocalMap is the local training map of the quadratic instance: K steps of gradient
// descent with rate eta on f_i, w <- w - eta (a w - b_i) = (1 - eta a) w + eta b_i, take w to
//
//	rho w + gain b_i,  rho = (1 - eta a)^K,  gain = eta sum_{k<K} (1 - eta a)^k = (1 - rho)/a
//
// (gain = eta K when a = 0). The server average of the clients' outputs is then
// rho w + gain mean_i b_i. Both are computed without cancellation when eta a is small.
func QuadraticLocalMap(a, eta float64, K int) (rho, gain float64, err error) {
	switch {
	case K < 1:
		return 0, 0, fmt.Errorf("quadratic local map: K must be >= 1, got %d", K)
	case !positiveFinite(eta):
		return 0, 0, fmt.Errorf("quadratic local map: eta must be positive and finite, got %v", eta)
	case math.IsNaN(a) || math.IsInf(a, 0):
		return 0, 0, fmt.Errorf("quadratic local map: curvature a must be finite, got %v", a)
	case a == 0:
		return 1, eta * float64(K), nil
	}
	q := 1 - eta*a
	kf := float64(K)
	var oneMinusRho float64 // 1 - q^K
	switch {
	case q > 0:
		l := kf * math.Log1p(-eta*a)
		rho, oneMinusRho = math.Exp(l), -math.Expm1(l)
	case q == 0:
		rho, oneMinusRho = 0, 1
	default:
		l := kf * math.Log(-q)
		if K%2 == 0 {
			rho, oneMinusRho = math.Exp(l), -math.Expm1(l)
		} else {
			rho, oneMinusRho = -math.Exp(l), 1+math.Exp(l)
		}
	}
	return rho, oneMinusRho / a, nil
}

// QuadraticDelta is the shift Delta = c - c' of the server's affine map phi(w) = rho w + c
// between the adjacent datasets, when client i*'s linear coefficient changes by
// bDiff = b_{i*} - b'_{i*} (for b_i the mean of the client's n_{i*} samples, bDiff is
// (epsilon - epsilon')/n_{i*}) and the server averages m clients:
// Delta = gain bDiff / m. It returns rho and ||Delta||.
func QuadraticDelta(a, eta float64, K, m int, bDiff []float64) (rho, deltaNorm float64, err error) {
	if m < 1 {
		return 0, 0, fmt.Errorf("quadratic delta: m must be >= 1, got %d", m)
	}
	if len(bDiff) == 0 {
		return 0, 0, errors.New("quadratic delta: empty bDiff")
	}
	rho, gain, err := QuadraticLocalMap(a, eta, K)
	if err != nil {
		return 0, 0, err
	}
	// ||bDiff|| scaled by its largest entry, so that no square overflows.
	largest := 0.0
	for _, v := range bDiff {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, 0, fmt.Errorf("quadratic delta: bDiff has a non-finite entry %v", v)
		}
		largest = math.Max(largest, math.Abs(v))
	}
	norm := 0.0
	if largest > 0 {
		sum := 0.0
		for _, v := range bDiff {
			sum += (v / largest) * (v / largest)
		}
		norm = largest * math.Sqrt(sum)
	}
	return rho, math.Abs(gain) * norm / float64(m), nil
}

// QuadraticFinalMu is the exact mu of the final model w_T of the quadratic instance with m
// clients averaged per round, per-client noise std sigma, contraction rho and shift norm
// ||Delta||:
//
//	mu_T = (sqrt(m) ||Delta|| / sigma) (sum_{j<T} rho^j) / sqrt(sum_{j<T} rho^{2j}).
//
// For rho > 0 the ratio is sqrt(tanh(T x/2)/tanh(x/2)) with x = log rho, stable for rho near 1
// and finite for rho > 1 at any T; rho <= 0 uses the log-scaled recurrence of BoundsContext.
// Invalid arguments (m < 1, T < 1, sigma <= 0, negative or non-finite norm or rho) give NaN.
func QuadraticFinalMu(m int, deltaNorm, sigma, rho float64, T int) float64 {
	if m < 1 || T < 1 || !positiveFinite(sigma) || !(deltaNorm >= 0) || math.IsInf(deltaNorm, 1) ||
		math.IsNaN(rho) || math.IsInf(rho, 0) {
		return math.NaN()
	}
	scale := math.Sqrt(float64(m)) * deltaNorm / sigma
	if rho > 0 {
		x := math.Log(rho)
		if x == 0 {
			return scale * math.Sqrt(float64(T))
		}
		return scale * math.Sqrt(math.Tanh(float64(T)*x/2)/math.Tanh(x/2))
	}
	if rho == -1 {
		// sum_{j<T} (-1)^j is 1 or 0 exactly; the recurrence would leave rounding there.
		return scale * float64(T%2) / math.Sqrt(float64(T))
	}
	var acc ratioAccumulator
	logAbs := math.Log(-rho) // -Inf for rho = 0: every earlier round is forgotten
	for t := 0; t < T; t++ {
		acc.push(-1, logAbs, 1)
	}
	return scale * math.Abs(acc.ratio)
}

// QuadraticAllIteratesMu is the exact mu of the whole trajectory w_1..w_T of the quadratic
// instance: each round is a Gaussian mechanism with sensitivity ||Delta|| and noise std
// sigma/sqrt(m), composed T times: (sqrt(m) ||Delta|| / sigma) sqrt(T). Invalid arguments
// give NaN.
func QuadraticAllIteratesMu(m int, deltaNorm, sigma float64, T int) float64 {
	if m < 1 || T < 1 || !positiveFinite(sigma) || !(deltaNorm >= 0) || math.IsInf(deltaNorm, 1) {
		return math.NaN()
	}
	return math.Sqrt(float64(m)) * deltaNorm / sigma * math.Sqrt(float64(T))
}

// QuadraticUploadMu is the exact mu of the uploads observer at T on the quadratic instance: the
// observer sees w_{T-1} and the target client's upload of that round,
// U = rho w_{T-1} + gain b_{i*} + sigma Z with a fresh Z. (w_{T-1}, U - rho w_{T-1}) is an
// invertible linear image of what it sees, with independent parts, so
//
//	mu_up(T) = sqrt(mu_final(T-1)^2 + (m ||Delta|| / sigma)^2),
//
// m ||Delta|| = |gain| ||bDiff|| being the shift of one upload (the average divides it by m),
// and mu_final(0) = 0 (w_0 is public). Invalid arguments give NaN.
func QuadraticUploadMu(m int, deltaNorm, sigma, rho float64, T int) float64 {
	if m < 1 || T < 1 || !positiveFinite(sigma) || !(deltaNorm >= 0) || math.IsInf(deltaNorm, 1) ||
		math.IsNaN(rho) || math.IsInf(rho, 0) {
		return math.NaN()
	}
	prev := 0.0
	if T > 1 {
		prev = QuadraticFinalMu(m, deltaNorm, sigma, rho, T-1)
	}
	return math.Hypot(prev, float64(m)*deltaNorm/sigma)
}
