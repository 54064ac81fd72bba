package algo

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The enums decode from YAML and JSON, reject unknown values with a message naming the valid
// ones, accept the empty string (defaulted or reported by configuration validation) and encode
// back to the same text.
func TestDecode(t *testing.T) {
	type cfg struct {
		Algorithm Algorithm `json:"algorithm" yaml:"algorithm"`
		Batching  Batching  `json:"batching" yaml:"batching"`
		Mechanism Mechanism `json:"mechanism,omitempty" yaml:"mechanism,omitempty"`
	}
	for _, tc := range []struct {
		name, yaml, json string
		want             cfg
		err              string
	}{
		{"all", "algorithm: dp-fedavg\nbatching: poisson\nmechanism: laplace\n", `{"algorithm":"dp-fedavg","batching":"poisson","mechanism":"laplace"}`, cfg{DPFedAvg, Poisson, Laplace}, ""},
		{"defaults", "algorithm: fedprox\nbatching: \"\"\n", `{"algorithm":"fedprox","batching":""}`, cfg{FedProx, "", ""}, ""},
		{"bad algorithm", "algorithm: fedavgg\n", `{"algorithm":"fedavgg"}`, cfg{}, `algorithm: "fedavgg" is not fedavg, fedprox, dpsgd, dp-fedavg, idp-fedavg or adaptive-fedavg`},
		{"bad batching", "batching: Fixed\n", `{"batching":"Fixed"}`, cfg{}, `batching: "Fixed" is not full, fixed or poisson`},
		{"bad mechanism", "mechanism: gauss\n", `{"mechanism":"gauss"}`, cfg{}, `mechanism: "gauss" is not gaussian, laplace or staircase`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var y, j cfg
			errY := yaml.Unmarshal([]byte(tc.yaml), &y)
			errJ := json.Unmarshal([]byte(tc.json), &j)
			for _, e := range []struct {
				form string
				err  error
				got  cfg
			}{{"yaml", errY, y}, {"json", errJ, j}} {
				if tc.err != "" {
					if e.err == nil || !strings.Contains(e.err.Error(), tc.err) {
						t.Errorf("%s: error %v, want one containing %q", e.form, e.err, tc.err)
					}
					continue
				}
				if e.err != nil || e.got != tc.want {
					t.Errorf("%s: %+v, %v; want %+v", e.form, e.got, e.err, tc.want)
				}
			}
			if tc.err != "" {
				return
			}
			out, err := json.Marshal(tc.want)
			if err != nil || string(out) != tc.json {
				t.Errorf("json.Marshal = %s, %v; want %s", out, err, tc.json)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, a := range Algorithms {
		if err := a.Validate(); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	if err := Algorithm("").Validate(); err == nil {
		t.Error("the empty algorithm is valid")
	}
	if err := Batching("").Validate(); err == nil {
		t.Error("the empty batching is valid")
	}
	if err := Mechanism("").Validate(); err != nil || Mechanism("").OrGaussian() != Gaussian {
		t.Errorf("the empty mechanism: %v, means %q; want valid, gaussian", err, Mechanism("").OrGaussian())
	}
	for a, want := range map[Algorithm]bool{FedAvg: false, FedProx: false, DPSGD: false, DPFedAvg: true, IDPFedAvg: true, AdaptiveFedAvg: true} {
		if a.ClientDP() != want {
			t.Errorf("%s.ClientDP() = %v", a, !want)
		}
	}
}

// UnmarshalText takes configuration text from outside: it accepts exactly the valid values and
// the empty string, and never panics.
func FuzzUnmarshalText(f *testing.F) {
	for _, s := range []string{"", "fedavg", "dp-fedavg", "poisson", "laplace", "x\x00", "FEDAVG"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a Algorithm
		var b Batching
		var m Mechanism
		for _, c := range []struct {
			err   error
			valid bool
		}{
			{a.UnmarshalText([]byte(s)), s == "" || Algorithm(s).Validate() == nil},
			{b.UnmarshalText([]byte(s)), s == "" || Batching(s).Validate() == nil},
			{m.UnmarshalText([]byte(s)), Mechanism(s).Validate() == nil},
		} {
			if (c.err == nil) != c.valid {
				t.Fatalf("%q: error %v, valid %v", s, c.err, c.valid)
			}
		}
	})
}
