# Convenience targets. The README's two quickstart commands need none of them.
GO ?= go

.PHONY: test demo results build

build:
	$(GO) build -o bin/audit ./cmd/audit

test:
	$(GO) test ./...

demo:
	$(GO) run ./cmd/audit demo

# Regenerates every reference experiment of results/ (configs in results/*/config.yaml) and its
# report, with the seeds the configs fix, so the committed reports are what this produces.
results: build
	./results/regenerate.sh ./bin/audit
