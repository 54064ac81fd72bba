package importer

import (
	"strings"
	"testing"
)

// A JSON manifest is one value: what follows the object (a second object appended, say) must be
// refused, not dropped with its entries. A byte-order mark, as spreadsheets and Windows editors
// write before CSV and JSON, is not part of the first column's name or of the JSON.
func TestManifestWholeInput(t *testing.T) {
	for _, s := range []string{
		`{"entries": [{"file": "a", "world": "C", "pair": 0, "round": 0}]} {"entries": [{"file": "b", "world": "C'", "pair": 0, "round": 0}]}`,
		`{"entries": [{"file": "a", "world": "C", "pair": 0, "round": 0}]} trailing`,
	} {
		if es, err := parseManifest([]byte(s)); err == nil {
			t.Errorf("%s: accepted as %+v", s, es)
		}
	}
	for _, s := range []string{
		"\ufefffile,world,pair,round\na,C,0,0\n",
		"\ufeff[{\"file\": \"a\", \"world\": \"C\", \"pair\": 0, \"round\": 0}]",
	} {
		es, err := parseManifest([]byte(s))
		if err != nil || len(es) != 1 || es[0].File != "a" {
			t.Errorf("%q: %+v, %v", s, es, err)
		} else if strings.HasPrefix(es[0].File, "\ufeff") {
			t.Errorf("%q: the mark is kept", s)
		}
	}
}

// A blank pair or round cell in a CSV manifest is an error naming its line, as an absent pair or
// round is in a JSON manifest: read as 0 it listed the row as pair 0, or as w_0. A blank client
// is a global model, as documented.
func TestManifestBlankPairOrRound(t *testing.T) {
	cases := []struct{ name, csv, want string }{
		{"blank pair", "file,world,pair,round\na.npy,C,0,0\nb.npy,C', ,1\n", "line 3: empty pair (file, world, pair and round are required)"},
		{"blank round", "file,world,pair,round\na.npy,C,0,\n", "line 2: empty round (file, world, pair and round are required)"},
		{"blank client", "file,world,pair,round,client\na.npy,C,0,1,\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			es, err := parseManifest([]byte(c.csv))
			if c.want == "" {
				if err != nil || len(es) != 1 || es[0].Client != -1 {
					t.Fatalf("entries %+v, error %v; want one global model", es, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("entries %+v, error %v; want one containing %q", es, err, c.want)
			}
		})
	}
}
