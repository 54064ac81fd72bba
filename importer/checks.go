package importer

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/runs"
)

// checkInitial checks round 0's snapshots (params, run 2 pair + world; nil where a snapshot
// could not be read, a problem listed already): every run starts from the same public w_0, both
// worlds of a pair and every pair (docs/import.md). The reference is the w_0 most runs hold (the
// earliest run's among equally many), so one odd pair is named rather than all the others.
func (rd *reader) checkInitial(params [][]float32, ri int, probs *problems) {
	file := func(r int) string { return rd.plan.Files[r/2][r%2][ri] }
	count := map[uint64]int{}
	hashes := make([]uint64, len(params))
	ref := -1
	for r, v := range params {
		if v == nil {
			continue
		}
		hashes[r] = hashBits(v)
		count[hashes[r]]++
		if ref < 0 || count[hashes[r]] > count[hashes[ref]] {
			ref = r
		}
	}
	if ref < 0 {
		return
	}
	w0, same := params[ref], count[hashes[ref]]
	for p := 0; 2*p+1 < len(params); p++ {
		c, cp := params[2*p], params[2*p+1]
		if c == nil || cp == nil {
			continue
		}
		if i := firstDiff(c, cp); i >= 0 {
			probs.add("pair %d: world C' starts from another w_0 than world C: %s and %s differ first at parameter %d (%s): %g against %g; both runs of a pair start from the same w_0",
				p, file(2*p), file(2*p+1), i, rd.lay.slotOf(i), c[i], cp[i])
			continue
		}
		if i := firstDiff(c, w0); i >= 0 {
			probs.add("pair %d: w_0 (%s, both worlds) differs from the w_0 most runs start from (%s, %d of %d runs) first at parameter %d (%s): %g against %g; every run starts from the same public w_0",
				p, file(2*p), file(ref), same, len(params), i, rd.lay.slotOf(i), c[i], w0[i])
		}
	}
}

// digestBits is the SHA-256 of v's bits (each float32's little-endian bytes).
func digestBits(v []float32) [sha256.Size]byte {
	h := sha256.New()
	b := make([]byte, 0, 4096)
	for i, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		if len(b) == cap(b) || i == len(v)-1 {
			h.Write(b)
			b = b[:0]
		}
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// hashBits hashes v's bits (FNV-1a over each float32's little-endian bytes).
func hashBits(v []float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, x := range v {
		u := math.Float32bits(x)
		b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		h.Write(b[:])
	}
	return h.Sum64()
}

// checkCopies checks the global models of one checkpoint after round 0 (params, run 2 pair +
// world; nil where a snapshot could not be read): after a round with noise, the runs of
// different pairs, trained with independent noise, never hold the same parameters bit for bit.
// Copies of one training listed as other pairs (under other file names, or as links, which the
// manifest's check of file names cannot see) would be audited as independent trainings and
// could certify a violation no training showed. The two runs of one pair may be equal: they
// share their noise, and the target client may have sat the round out. So may runs declared
// diverged (the manifest's diverged column), which keep earlier parameters, w_0 perhaps. Without
// noise (noisy false), equal runs of different pairs can be a real deterministic training, and
// nothing is checked.
func (rd *reader) checkCopies(params [][]float32, ri int, noisy bool, probs *problems) {
	if !noisy {
		return
	}
	round := rd.plan.Rounds[ri]
	file := func(r int) string { return rd.plan.Files[r/2][r%2][ri] }
	key := func(r int) (uint64, bool) {
		if params[r] == nil || rd.diverged(r, ri) {
			return 0, false
		}
		return hashBits(params[r]), true
	}
	same := func(a, b int) bool { return firstDiff(params[a], params[b]) < 0 }
	for _, c := range copiesAcrossPairs(len(params), key, same) {
		first, r := c[0], c[1]
		probs.add("round %d: pair %d world %s (%s) and pair %d world %s (%s) hold the same model bit for bit%s: runs of different pairs train with independent noise and never agree after a noisy round, so these are copies of one training, which would be audited as independent ones, or a trainer that adds no noise or draws every pair's noise from the same seed; give each pair its own training with its own noise (runs that diverged and kept earlier parameters: say so in the manifest's diverged column; snapshots stored at a precision that rounds the noise away cannot be audited)",
			round, first/2, runs.WorldName(int8(first%2)), file(first), r/2, runs.WorldName(int8(r%2)), file(r), moreCopies(c))
	}
}

// uploadCopies warns of the target client's uploads of one checkpoint after round 0 that agree
// bit for bit across pairs (norms, run 2 pair + world, hold the digests of the upload files as
// read; uploads is nil where a run has none). A deployment that noises each upload never gives
// two pairs the same one, so such uploads are one of two things the import cannot tell apart:
// copies of one pair's upload files listed for other pairs (links, or an export that wrote one
// pair's uploads for all), which the uploads observer would count as independent uploads and
// certify a violation no training showed; or uploads that carry no noise at all (a server that
// noises the average only), which is a violation of the deployment's own, and what `audit
// check` then finds (noise-scale, noise-shape). So it is a warning, not a refusal, naming the
// files and both readings. The files are compared as read (an update file, not the upload the
// import makes of it with w_{t-1}, which differs between pairs whatever the file holds), by
// their SHA-256: the vectors an update makes are not kept. The two runs of one pair may agree,
// as their global models may, and so may runs declared diverged.
func (rd *reader) uploadCopies(uploads [][]float32, norms []uploadNorms, ri int, noisy bool) []string {
	if !noisy || rd.plan.Uploads == nil {
		return nil
	}
	round := rd.plan.Rounds[ri]
	file := func(r int) string { return rd.plan.Uploads[r/2][r%2][ri] }
	key := func(r int) ([sha256.Size]byte, bool) {
		if uploads[r] == nil || rd.diverged(r, ri) {
			return [sha256.Size]byte{}, false
		}
		return norms[r].digest, true
	}
	var out []string
	for _, c := range copiesAcrossPairs(len(uploads), key, func(a, b int) bool { return true }) {
		first, r := c[0], c[1]
		out = append(out, fmt.Sprintf("round %d: the uploads of pair %d world %s (%s) and pair %d world %s (%s) are the same bit for bit%s, where a deployment that noises each upload never gives two pairs the same one: either they are copies of one upload (links, or an export that wrote one pair's uploads for all), which the uploads observer's rows would count as independent, certifying a violation no training showed (give each pair its own training's uploads); or the uploads carry no noise, which audit check tests (noise-scale, noise-shape)",
			round, first/2, runs.WorldName(int8(first%2)), file(first), r/2, runs.WorldName(int8(r%2)), file(r), moreCopies(c)))
	}
	return out
}

// diverged says whether the manifest declares run r (2 pair + world) diverged at checkpoint ri.
func (rd *reader) diverged(r, ri int) bool {
	return rd.plan.Diverged != nil && rd.plan.Diverged[r/2][r%2][ri]
}

// copiesAcrossPairs groups runs 0..n-1 by key (runs whose ok is false are left out) and returns,
// for each group in the order of its first run, that run followed by the runs of other pairs
// that same confirms equal to it, where there are any. Equal runs of one pair are no copies.
func copiesAcrossPairs[K comparable](n int, key func(r int) (K, bool), same func(a, b int) bool) [][]int {
	byKey := map[K][]int{}
	var order []K
	for r := range n {
		k, ok := key(r)
		if !ok {
			continue
		}
		if byKey[k] == nil {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	var out [][]int
	for _, k := range order {
		runsOf := byKey[k]
		first := runsOf[0]
		c := []int{first}
		for _, r := range runsOf[1:] {
			if r/2 != first/2 && same(first, r) {
				c = append(c, r)
			}
		}
		if len(c) > 1 {
			out = append(out, c)
		}
	}
	return out
}

// moreCopies says how many runs beyond the first two a group of copiesAcrossPairs holds.
func moreCopies(c []int) string {
	if len(c) <= 2 {
		return ""
	}
	return fmt.Sprintf(" (and %d more runs of other pairs)", len(c)-2)
}

// firstDiff is the first index where a and b differ bit for bit, or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// uploadNorms are the norms that tell an uploaded model from an update: of the upload's file,
// of the global model w_{t-1} it started from, and of their difference; and the SHA-256 of the
// file's values as read (digestBits), which tells copied upload files (checkUploadCopies).
type uploadNorms struct {
	file, prev, diff float64
	digest           [sha256.Size]byte
}

func normsOf(file, prev []float32) uploadNorms {
	var n uploadNorms
	for i, x := range file {
		f, p := float64(x), float64(prev[i])
		n.file += f * f
		n.prev += p * p
		n.diff += (f - p) * (f - p)
	}
	n.file, n.prev, n.diff = math.Sqrt(n.file), math.Sqrt(n.prev), math.Sqrt(n.diff)
	return n
}

// uploadKindRatio is how far apart the two readings of the upload files must be (the median of
// |file - w_{t-1}| / |file|) before the import says which kind the files hold: an uploaded model
// lies near w_{t-1} (the ratio is about |update| / |w_{t-1}|), an update near 0 (about
// |w_{t-1}| / |update|). Where updates are not small beside the model the ratio is near 1 either
// way and nothing is said.
const uploadKindRatio = 2

// uploadKindWarning returns a warning when the norms of the target client's upload files say
// they hold the other kind than the one they are read as (updates: whether --uploads update was
// given), or "".
func uploadKindWarning(norms []uploadNorms, updates bool) string {
	var ratio, rel, dist []float64
	for _, n := range norms {
		if n.file == 0 || n.prev == 0 {
			continue // w_{t-1} = 0 (or a zero file): both readings are the same
		}
		ratio = append(ratio, n.diff/n.file)
		rel = append(rel, n.file/n.prev)
		dist = append(dist, n.diff/n.prev)
	}
	if len(ratio) == 0 {
		return ""
	}
	r, fileRel, distRel := audit.Median(ratio), audit.Median(rel), audit.Median(dist)
	attacks := "as they are read now, the uploads observer's attacks (upload-lda, label, inversion, invgrad, informed-upload) score the wrong vectors"
	switch {
	case !updates && r > uploadKindRatio:
		return fmt.Sprintf("the target client's upload files look like updates (the upload minus w_{t-1}), not the uploaded models they are read as (--uploads model, the default): "+
			"their norms are a median %.3g of the norm of w_{t-1}, and they lie %.3g of that norm away from it, where an uploaded model lies near w_{t-1} (%d uploads). "+
			"If they are updates, import them with --uploads update; %s", fileRel, distRel, len(ratio), attacks)
	case updates && r < 1/float64(uploadKindRatio):
		return fmt.Sprintf("the target client's upload files look like uploaded models, not the updates (the upload minus w_{t-1}) they are read as (--uploads update): "+
			"their norms are a median %.3g of the norm of w_{t-1}, and they lie only %.3g of that norm away from it, where an update is small beside the model (%d uploads). "+
			"If they are the uploaded models, import them with --uploads model; %s", fileRel, distRel, len(ratio), attacks)
	}
	return ""
}
