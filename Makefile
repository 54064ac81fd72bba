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

# GPU backend (docs/gpu.md). generate-ptx needs nvcc (CUDA 11.8 or 12.x; 13 is refused);
# test-gpu and bench-gpu need an NVIDIA GPU: the test binary exits at start-up without one.
# gpu-kit builds the validation kit (bin/gpu-kit, under 64 MiB) without a GPU; it needs the
# CUDA headers and libcuda.so (or its stub) to link, as .ci/gpu-checks installs them.
.PHONY: generate-ptx test-gpu bench-gpu gpu-kit

generate-ptx:
	$(GO) generate ./kernels

test-gpu:
	$(GO) test -tags gpu -count=1 -v -run . ./cuda

bench-gpu:
	$(GO) test -tags gpu -count=1 -run '^$$' -bench 'W1|W2' -benchtime 1x -timeout 60m ./cuda

gpu-kit:
	GO=$(GO) ./cuda/kit/build.sh bin/gpu-kit
