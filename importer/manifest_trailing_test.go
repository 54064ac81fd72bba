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
