package spec

import (
	"errors"
	"strings"
	"testing"
)

// tinyHead is the smallest data section the config tests build on: one pair, two synthetic
// clients of four samples.
const tinyHead = "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\n"

// wantConfigError fails unless err is a *ConfigError whose text says every one of wants.
func wantConfigError(t *testing.T, err error, wants ...string) {
	t.Helper()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v (%T), want a *ConfigError", err, err)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
