package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"local_steps", "learning_rate", "rounds", "score", "world"}
	for _, tc := range []struct {
		name string
		max  int
		want string
	}{
		{"local_step", 2, "local_steps"},
		{"learnig_rate", 2, "learning_rate"},
		{"scroe", 2, "score"},
		{"rounds", 2, "rounds"},
		{"participants", 2, ""},
		{"word", 0, ""},
		{"word", 1, "world"},
	} {
		if got := Closest(tc.name, known, tc.max); got != tc.want {
			t.Errorf("Closest(%q, %d) = %q, want %q", tc.name, tc.max, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}} {
		if got := EditDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
