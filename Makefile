# presenced — see README.md.
GO ?= go

.PHONY: test check build run

# test: what CI runs. gofmt and go vet must be clean, and every test runs with
# the race detector.
test: check
	$(GO) test -race -count=1 ./...

check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l reports:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

build:
	$(GO) build -o bin/presenced ./cmd/presenced

run:
	$(GO) run ./cmd/presenced
