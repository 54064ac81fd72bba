package importer

import (
	"testing"
)

// FuzzManifest feeds arbitrary bytes to the manifest parser and validates what it accepts: it
// must never panic, and every entry it returns must have a world of 0 or 1 and a file.
func FuzzManifest(f *testing.F) {
	for _, seed := range []string{
		"file,world,pair,round,client,canary\na.npy,C,0,0,,false\nb.npy,C',0,1,2,true\n",
		"file,world,pair,round\n",
		"pair_id,file,round,world\n1,x,2,Cprime\n",
		`[{"file": "a", "world": "C", "pair": 0, "round": 0, "client": 1}]`,
		`{"entries": [{"file": "a", "world": 1, "pair": -1, "round": 99999999999}]}`,
		"file,world,pair,round\n\"unterminated,C,0,0\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		entries, err := parseManifest(raw)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.File == "" || (e.World != 0 && e.World != 1) || e.Client < -1 {
				t.Fatalf("accepted entry %+v", e)
			}
		}
		m := &Manifest{Path: "fuzz", Entries: entries}
		m.Validate(Expect{Pairs: 3, Rounds: []int{0, 1, 2}, Clients: 3, TargetClient: 1})
		m.Validate(Expect{Pairs: 1, Rounds: []int{0}, Clients: 1, Partial: true})
	})
}
