# sluice — build, test and demo.
GO ?= go
# Packages with goroutines, locks or atomics run under the race detector.
RACE_PKGS = . ./gate/... ./monitor/... ./control/... ./stage/... ./policer/... ./policy/... ./classify/... ./share/... ./proxy/... ./reliability/... ./cluster ./cluster/localredis

.PHONY: all build test vet fmt-check demo bench reliability clean

all: build

build:
	$(GO) build -o bin/sluice ./cmd/sluice

## test: formatting, vet, all tests, -race on the concurrent packages, the
## dashboard in Chromium and the alert rules with promtool, and the
## bookstore on a real PostgreSQL, cluster mode on a real redis-server
## (Chromium, promtool, redis-server and PostgreSQL are installed from
## Debian when missing). Test artifacts (the dashboard's screenshots) go
## to out/test/. The live figures of cluster mode (three proxy processes
## under load, against ±5 % bars) run last and alone, so that no other
## package's tests share the CPUs with them.
test: fmt-check vet
	./scripts/test-deps.sh
	@rm -rf out/test && mkdir -p out/test
	SLUICE_REQUIRE_BROWSER=1 SLUICE_REQUIRE_PROMTOOL=1 SLUICE_REQUIRE_REDIS=1 $(GO) test -artifacts -outputdir $(CURDIR)/out/test -skip '^TestLiveClusterFigure' ./...
	SLUICE_REQUIRE_REDIS=1 $(GO) test -race $(RACE_PKGS)
	SLUICE_REQUIRE_REDIS=1 $(GO) test -count=1 -v -run '^TestLiveClusterFigure' ./cluster/figures
	./scripts/test-postgres.sh

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## demo: the built-in default: a bookstore, the proxy and a flash crowd from
## 0.5x to 10x capacity, without control, with auto, seda and yaksha (~100 s).
demo:
	$(GO) run ./cmd/sluice demo

## reliability: the long forms of the reliability suite against sluice and
## nginx (slowhttptest, 25,000 connections, a backend stall, a 10-minute
## soak; ~45 min, installs nginx and slowhttptest when missing). The short
## forms run in make test. ARGS="-scale 0.1 all" for a quick check.
reliability:
	./scripts/reliability.sh $(ARGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./gate/... ./monitor/...

clean:
	rm -rf bin out
