package spec

// ClientSteps lets the external tests hold the job-size cap's count against cost.Plan's.
var ClientSteps = clientSteps
