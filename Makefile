# sluice — build, test and demo.
GO ?= go
# Packages with goroutines, locks or atomics run under the race detector.
RACE_PKGS = . ./gate/... ./monitor/... ./control/... ./stage/... ./policer/... ./policy/... ./classify/... ./share/... ./proxy/...

.PHONY: all build test vet fmt-check demo bench clean

all: build

build:
	$(GO) build -o bin/sluice ./cmd/sluice

## test: formatting, vet, all tests, and -race on the concurrent packages.
test: fmt-check vet
	$(GO) test ./...
	$(GO) test -race $(RACE_PKGS)

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## demo: the built-in default run (until the live demo lands: the design tool
## on the Kihl and Yaksha papers' parameters).
demo:
	$(GO) run ./cmd/sluice design kihl --sigma 44.4 --h 1s --K 20 --Ti 2.8
	$(GO) run ./cmd/sluice design yaksha --tref 150ms --lambda0 50 --h 1s

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./gate/... ./monitor/...

clean:
	rm -rf bin out
