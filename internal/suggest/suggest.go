// Package suggest finds the known name a mistyped one was probably meant to be, for the
// "did you mean" of error messages about names a user wrote (a score file's columns, a
// config's fields).
package suggest

// Closest is the name among known within maxEdits edits of name (Levenshtein distance) and
// nearest to it, the first of equally near ones; "" when none is that near.
func Closest(name string, known []string, maxEdits int) string {
	best, bestDist := "", maxEdits+1
	for _, k := range known {
		if d := EditDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b (bytes), for short names.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
