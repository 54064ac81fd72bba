package tables

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/theory"
)

// jsonNumber is a float for JSON, null where it is NaN or infinite (which JSON cannot hold),
// rounded to 12 significant digits: beyond the accuracy of the computation (about 1e-10
// relative after 10^6 rounds), and short of the last bits that differ between platforms
// that fuse multiply-adds and those that do not.
func jsonNumber(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 12, 64), 64)
	if err != nil {
		return nil // unreachable: FormatFloat's output always parses
	}
	return &r
}

// BoundsJSON writes the theory's bounds as `audit bound --json` does: one object per T, NaN and
// infinity as null.
func BoundsJSON(w io.Writer, bounds []theory.Bound) error {
	type row struct {
		T                  int      `json:"T"`
		Mu                 *float64 `json:"mu"`
		MuClosedForm       *float64 `json:"mu_closed_form"`
		ClosedFormKind     string   `json:"closed_form_kind"`
		MuComposition      *float64 `json:"mu_composition"`
		Epsilon            *float64 `json:"epsilon"`
		EpsilonComposition *float64 `json:"epsilon_composition"`
		// The uploads observer: w_{T-1} and one noisy upload of the target client.
		MuUploads            *float64 `json:"mu_uploads"`
		MuUploadsComposition *float64 `json:"mu_uploads_composition"`
		Delta                float64  `json:"delta"`
	}
	rows := make([]row, len(bounds))
	for i, b := range bounds {
		rows[i] = row{
			T: b.T, Mu: jsonNumber(b.Mu), MuClosedForm: jsonNumber(b.MuClosedForm),
			ClosedFormKind: b.ClosedFormKind, MuComposition: jsonNumber(b.MuComposition),
			Epsilon: jsonNumber(b.Epsilon), EpsilonComposition: jsonNumber(b.EpsilonComposition),
			MuUploads: jsonNumber(b.MuUploads), MuUploadsComposition: jsonNumber(b.MuUploadsComposition),
			Delta: b.Delta,
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// tableNumber prints six decimals (the precision of docs/theory.md's worked example), switching to
// exponent notation where that would be unreadably long, or would print a small bound as 0
// (mu 4.47e-8 at sigma 1e6 printed 0.000000).
func tableNumber(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case math.IsInf(x, 1):
		return "inf"
	case math.Abs(x) >= 1e7 || (x != 0 && math.Abs(x) < 1e-3):
		return strconv.FormatFloat(x, 'e', 6, 64)
	}
	return strconv.FormatFloat(x, 'f', 6, 64)
}

// Bounds writes the theory's bounds as `audit bound` does: a header naming the configuration
// (scheduleFile: the schedule table's file, "" for a named schedule) and one row per T.
func Bounds(w io.Writer, cfg theory.Config, scheduleFile string, bounds []theory.Bound) error {
	var hdr strings.Builder
	fmt.Fprintf(&hdr, "# %s", cfg.Algo)
	if scheduleFile != "" {
		r, k := cfg.Schedule.(*theory.TableSchedule).Size()
		fmt.Fprintf(&hdr, ", schedule table %dx%d", r, k)
	} else {
		fmt.Fprintf(&hdr, ", %s schedule, eta=%g", cfg.ScheduleName, cfg.Eta)
	}
	fmt.Fprintf(&hdr, ", L=%g, K=%d", cfg.L, cfg.K)
	if cfg.Algo != algo.DPSGD {
		fmt.Fprintf(&hdr, ", m=%d", cfg.M)
	}
	fmt.Fprintf(&hdr, ", n=%d, sigma=%g, V=%g", cfg.EffectiveClients(), cfg.Sigma, cfg.Clip)
	if cfg.Algo == algo.FedProx {
		fmt.Fprintf(&hdr, ", alpha=%g", cfg.Alpha)
		if cfg.ProxConstant {
			hdr.WriteString(" (constant rho, gamma)")
		} else {
			hdr.WriteString(" (exact per-round rho, gamma)")
		}
	}
	fmt.Fprintf(&hdr, "; epsilon at delta=%g\n", bounds[0].Delta)
	if _, err := fmt.Fprint(w, hdr.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "T\tmu\tmu_closed_form\tkind\tmu_composition\tepsilon\tepsilon_composition\tmu_uploads\t")
	for _, b := range bounds {
		kind := b.ClosedFormKind
		if kind == "" {
			kind = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", b.T, tableNumber(b.Mu), tableNumber(b.MuClosedForm),
			kind, tableNumber(b.MuComposition), tableNumber(b.Epsilon), tableNumber(b.EpsilonComposition), tableNumber(b.MuUploads))
	}
	return tw.Flush()
}
