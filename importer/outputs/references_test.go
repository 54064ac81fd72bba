package outputs

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Calibration subtracts the mean of a run's reference records from its canary's statistic, so
// the runs must be calibrated on the same records: world C queried on easy records and world C'
// on hard ones would shift every score of one world and separate the worlds with no leak at
// all. Equal counts are not enough; the records' names must agree, each given once per run.
func TestReferenceRecordsMatch(t *testing.T) {
	head := "pair_id,world,record,loss\n"
	pair := func(p string, refC, refCp []string) string {
		s := p + ",C,canary,1\n" + p + ",C',canary,1\n"
		for _, r := range refC {
			s += p + ",C," + r + ",1\n"
		}
		for _, r := range refCp {
			s += p + ",C'," + r + ",1\n"
		}
		return s
	}
	cases := []struct{ name, csv, want string }{
		{"other records in C'", head + pair("0", []string{"a"}, []string{"b"}) + pair("1", []string{"a"}, []string{"b"}),
			`pair 0 world C' round 0: reference records "b", the first run (pair 0 world C round 0) has "a"`},
		{"a record twice", head + pair("0", []string{"a", "b"}, []string{"a", "b"}) + pair("1", []string{"a", "a"}, []string{"a", "b"}),
			`row 10: reference record "a" of pair 1 world C round 0 given twice (also row 9)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tab, err := ReadCSV(strings.NewReader(c.csv))
			if err == nil {
				_, err = Score(context.Background(), tab, Options{})
			}
			var ie *InputError
			if err == nil || !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want an InputError containing %q", err, c.want)
			}
		})
	}
	ok := head + pair("0", []string{"a", "b"}, []string{"b", "a"}) + pair("1", []string{"b", "a"}, []string{"a", "b"})
	tab, err := ReadCSV(strings.NewReader(ok))
	if err == nil {
		_, err = Score(context.Background(), tab, Options{})
	}
	if err != nil {
		t.Fatalf("the same records in another order refused: %v", err)
	}
}
