// Package findings is the one model of an audit's results: a Finding per (attack, threat
// model, round), the Family of rows certified together, the Headline verdict, the Analysis
// that holds them, and the RoundSummary of what training measured at each checkpoint. Each
// type has exactly one JSON form, written here and read back here: findings.json (format
// "fedaudit-findings/3", and the bare array of rows older versions wrote) and rounds.json.
// Numbers without a value (NaN in Go, e.g. no exact mu, no theory) are null in JSON.
//
// experiment/ computes these values and report/ renders them; both import this package, so a
// field added here reaches the analysis, the JSON and the report at once. It knows nothing of
// training, files or configs: it imports only audit (the statistics a finding carries) and
// runs (the names of threat models).
package findings
