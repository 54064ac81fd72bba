package spec

import (
	"github.com/fedaudit/fedaudit/train/memory"
)

// ConfigError is a mistake in an experiment config (a field that does not parse, is out of
// range, or asks for more than the machine has), found before any data is loaded or any file is
// written. The command line exits with status 2 for it, 1 for failures of the work itself.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// MaxPairs is the most pairs one experiment may ask for. The attack stage keeps every run's
// rows of the attacked rounds in memory, and 10^8 pairs of the smallest model already take days
// to train on a GPU; a larger number is a typo (pairs: 1e12), not an audit.
const MaxPairs = 100_000_000

// Sizes returns the data sizes the training memory depends on. Before the data is loaded
// (data == nil) a named dataset's input dimension is not known and is taken as 1, which gives a
// lower bound of the memory: enough to refuse a model that cannot fit whatever the data.
func Sizes(cfg *Config, data *Data) memory.DataSizes {
	s := memory.DataSizes{Dim: 1, Classes: 2, Clients: cfg.Data.Clients, MaxSamples: cfg.Data.PerClient, TestSamples: cfg.Data.TestSamples}
	if cfg.Data.Source == "synthetic" {
		s.Dim, s.Classes = cfg.Data.Synthetic.Dim, cfg.Data.Synthetic.Classes
	}
	if im := cfg.Data.Images; cfg.Data.Source == "synthetic-images" && im != nil {
		c := im.config(cfg.Seed, 0)
		s.Dim, s.Classes = c.Channels*c.Height*c.Width, c.Classes
	}
	if data != nil {
		s = memory.SizesOf(data.Pair.C, data.Test)
	}
	return s
}
