package spec

import (
	"fmt"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
)

// CertifiedSmoothness is the certified smoothness constant of cfg's model over every sample of
// both worlds of data (hostmodel.CertifiedSmoothness: the quadratic model and softmax
// regression, an upper bound on the true L); ok is false for a model without one.
func CertifiedSmoothness(cfg *Config, data *Data) (L float64, ok bool) {
	return hostmodel.CertifiedSmoothness(cfg.Train.Model, data.Pair.C, data.Pair.CPrime)
}

// CheckSmoothness refuses, with a *ConfigError, an audit.smoothness below the certified
// constant of the model on data: a convergent bound computed with it would claim less than
// the theory allows. The certified constant depends on the samples (the canary among them), so
// the check needs the prepared data; PrepareContext makes it, so that every command refuses
// such a config before it trains (not after training and attacking, where the bounds are
// computed), and the attack stage's bounds.SmoothnessOf makes it again for data it did not
// prepare itself. It is the one place the comparison is made.
func CheckSmoothness(cfg *Config, data *Data) error {
	given := cfg.Audit.Smoothness
	if !(given > 0) {
		return nil // none given: the certified constant is used where there is one
	}
	certified, ok := CertifiedSmoothness(cfg, data)
	if ok && given < certified {
		return &ConfigError{Err: fmt.Errorf("audit.smoothness: %g is below the certified smoothness %g of the %s model on this data: leave it out to use the certified constant, or give at least that",
			given, certified, cfg.Train.Model.Kind)}
	}
	return nil
}
