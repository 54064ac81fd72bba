package algo

import (
	"fmt"
	"slices"
	"strings"
)

// Algorithm is a training algorithm. Its text form is the configuration's train.algorithm.
type Algorithm string

// The algorithms. FedAvg, FedProx and DPSGD add Gaussian (or other) noise to every client's
// upload (Noisy-FedAvg and Noisy-FedProx; DP-SGD is the one-client case); DPFedAvg,
// IDPFedAvg and AdaptiveFedAvg are the client-level DP-FedAvg family (Poisson-sampled clients,
// clipped updates, noise added by the server).
const (
	FedAvg         Algorithm = "fedavg"
	FedProx        Algorithm = "fedprox"
	DPSGD          Algorithm = "dpsgd"
	DPFedAvg       Algorithm = "dp-fedavg"
	IDPFedAvg      Algorithm = "idp-fedavg"
	AdaptiveFedAvg Algorithm = "adaptive-fedavg"
)

// Algorithms lists every algorithm, in the order error messages name them.
var Algorithms = []Algorithm{FedAvg, FedProx, DPSGD, DPFedAvg, IDPFedAvg, AdaptiveFedAvg}

// ClientDP reports whether a is one of the DP-FedAvg family.
func (a Algorithm) ClientDP() bool {
	return a == DPFedAvg || a == IDPFedAvg || a == AdaptiveFedAvg
}

// Validate reports whether a is one of Algorithms.
func (a Algorithm) Validate() error { return check(a, Algorithms) }

// MarshalText implements encoding.TextMarshaler.
func (a Algorithm) MarshalText() ([]byte, error) { return []byte(a), nil }

// UnmarshalText implements encoding.TextUnmarshaler (used by JSON and YAML): it accepts one
// of Algorithms, or the empty string, which configuration validation then reports.
func (a *Algorithm) UnmarshalText(b []byte) error { return parse(a, b, "algorithm", Algorithms) }

// Batching is how a local step samples its minibatch. Its text form is train.batching.
type Batching string

// The batchings: Full uses every sample of the client, Fixed BatchSize samples without
// replacement (the same for every replica), Poisson each sample independently with
// probability BatchSize/N (drawn per pair from the run seed).
const (
	Full    Batching = "full"
	Fixed   Batching = "fixed"
	Poisson Batching = "poisson"
)

// Batchings lists every batching.
var Batchings = []Batching{Full, Fixed, Poisson}

// Validate reports whether b is one of Batchings.
func (b Batching) Validate() error { return check(b, Batchings) }

// MarshalText implements encoding.TextMarshaler.
func (b Batching) MarshalText() ([]byte, error) { return []byte(b), nil }

// UnmarshalText implements encoding.TextUnmarshaler: one of Batchings, or the empty string
// (the experiment configuration's default, full).
func (b *Batching) UnmarshalText(t []byte) error { return parse(b, t, "batching", Batchings) }

// Mechanism is the distribution of the privacy noise. Its text form is train.mechanism; the
// empty string means Gaussian.
type Mechanism string

// The mechanisms, each used at a given standard deviation.
const (
	Gaussian  Mechanism = "gaussian"
	Laplace   Mechanism = "laplace"
	Staircase Mechanism = "staircase"
)

// Mechanisms lists every mechanism.
var Mechanisms = []Mechanism{Gaussian, Laplace, Staircase}

// OrGaussian returns m, or Gaussian when m is empty.
func (m Mechanism) OrGaussian() Mechanism {
	if m == "" {
		return Gaussian
	}
	return m
}

// Validate reports whether m is empty (Gaussian) or one of Mechanisms.
func (m Mechanism) Validate() error {
	if m == "" {
		return nil
	}
	return check(m, Mechanisms)
}

// MarshalText implements encoding.TextMarshaler.
func (m Mechanism) MarshalText() ([]byte, error) { return []byte(m), nil }

// UnmarshalText implements encoding.TextUnmarshaler: one of Mechanisms, or empty (Gaussian).
func (m *Mechanism) UnmarshalText(t []byte) error { return parse(m, t, "mechanism", Mechanisms) }

// check returns nil when v is in valid, else an error naming the valid values.
func check[T ~string](v T, valid []T) error {
	if slices.Contains(valid, v) {
		return nil
	}
	return fmt.Errorf("%q is not %s", v, list(valid))
}

// parse sets *v to the text t when it is empty or valid.
func parse[T ~string](v *T, t []byte, what string, valid []T) error {
	s := T(t)
	if s != "" {
		if err := check(s, valid); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	*v = s
	return nil
}

// list writes valid as "a, b or c".
func list[T ~string](valid []T) string {
	var sb strings.Builder
	for i, v := range valid {
		switch {
		case i == 0:
		case i == len(valid)-1:
			sb.WriteString(" or ")
		default:
			sb.WriteString(", ")
		}
		sb.WriteString(string(v))
	}
	return sb.String()
}
