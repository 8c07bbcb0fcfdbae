# sluice — build, test and demo.
#
# Two modules: the product (this directory, github.com/sluicehq/sluice:
# the proxy, the middleware, the controllers, the sluice binary) and the
# lab (lab/, github.com/sluicehq/sluice/lab: experiments, simulator, test
# backends, load generator, the sluice-lab binary). lab/go.mod points at
# this tree with a replace directive, so the lab always tests the product
# as it is here. Every target below covers both.
GO ?= go
# Packages with goroutines, locks or atomics run under the race detector.
RACE_PKGS = . ./gate/... ./monitor/... ./control/... ./stage/... ./policer/... ./policy/... ./classify/... ./share/... ./client/... ./grpcsluice/... ./proxy/... ./cluster ./internal/localredis
LAB_RACE_PKGS = ./reliability/... ./dashboard/...

.PHONY: all build lab image release release-check test vet lint fmt-check demo bench reliability clean manifests

all: build lab

## build: the product binary, bin/sluice.
build:
	$(GO) build -o bin/sluice ./cmd/sluice

## lab: the lab's binary, bin/sluice-lab.
lab:
	$(GO) -C lab build -o ../bin/sluice-lab ./cmd/sluice-lab

## image: the container image for linux/amd64 and linux/arm64, built
## from scratch without pulling anything (static binaries, CA
## certificates, user nonroot 65532), as an OCI archive:
## bin/sluice-image.oci.tar, which podman load names
## ghcr.io/sluicehq/sluice:VERSION (scripts/version.sh).
image:
	./scripts/image.sh

## release: static binaries for linux/amd64 and linux/arm64, a CycloneDX
## SBOM of each, the image and SHA256SUMS, in dist/ (RELEASING.md).
release:
	./scripts/release.sh

## release-check: the release built twice, the second time from a copy of
## the tree at another path with an empty build cache, both checked
## (checksums, static binaries that print the version, SBOMs against the
## binaries, the image) and compared byte for byte. Not part of test: it
## compiles everything for two architectures twice.
release-check:
	./scripts/release-check.sh

## test: formatting, import groups, vet and staticcheck in both modules,
## all tests, -race on the concurrent packages, the dashboard in Chromium
## and the alert rules with promtool, and the bookstore on a real
## PostgreSQL, cluster mode on a real redis-server (Chromium, promtool,
## redis-server and PostgreSQL are installed from Debian when missing).
## Test artifacts (the dashboard's screenshots) go to out/test/. The live
## figures of cluster mode (three proxy processes under load, against
## ±5 % bars) run last and alone, so that no other package's tests share
## the CPUs with them.
test: fmt-check vet lint
	./scripts/test-deps.sh
	@rm -rf out/test && mkdir -p out/test
	SLUICE_REQUIRE_PROMTOOL=1 SLUICE_REQUIRE_REDIS=1 $(GO) test ./...
	SLUICE_REQUIRE_BROWSER=1 SLUICE_REQUIRE_REDIS=1 SLUICE_REQUIRE_PODMAN=1 $(GO) -C lab test -artifacts -outputdir $(CURDIR)/out/test -skip '^TestLiveClusterFigure' ./...
	SLUICE_REQUIRE_PROMTOOL=1 $(GO) -C lab/deploy test ./...
	SLUICE_REQUIRE_REDIS=1 $(GO) test -race $(RACE_PKGS)
	SLUICE_REQUIRE_REDIS=1 $(GO) -C lab test -race $(LAB_RACE_PKGS)
	SLUICE_REQUIRE_REDIS=1 $(GO) -C lab test -count=1 -v -run '^TestLiveClusterFigure' ./cluster/figures
	./scripts/test-postgres.sh

vet:
	$(GO) vet ./...
	$(GO) -C lab vet ./...
	$(GO) -C lab/tools/peerref vet ./...
	$(GO) -C lab/deploy vet ./...

## lint: staticcheck (pinned in lab/go.mod as a tool) over every module,
## the import groups (standard library; other modules; sluice's own), and
## that the product module depends on none of the lab's libraries.
lint:
	$(GO) -C lab build -o ../bin/staticcheck honnef.co/go/tools/cmd/staticcheck
	bin/staticcheck ./...
	cd lab && ../bin/staticcheck ./...
	cd lab/tools/peerref && ../../../bin/staticcheck ./...
	cd lab/deploy && ../../bin/staticcheck ./...
	$(GO) -C lab run ./cmd/importgroups ..
	./scripts/check-lean.sh

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## manifests: what the Helm chart deploy/helm/sluice generates (its own
## module, lab/deploy, renders it with Helm's packages): the plain
## manifests of deploy/kubernetes, deploy/prometheus/alerts.yml and the
## chart's copy of deploy/grafana/sluice.json. make test fails when they
## are stale.
manifests:
	$(GO) -C lab/deploy run ./cmd/manifests ../..

## demo: the built-in default: a bookstore, the proxy and a flash crowd from
## 0.5x to 10x capacity, without control, with auto, seda and yaksha (~100 s).
demo: lab
	./bin/sluice-lab demo

## reliability: the long forms of the reliability suite against sluice and
## nginx (slowhttptest, 25,000 connections, a backend stall, a 10-minute
## soak; ~45 min, installs nginx and slowhttptest when missing). The short
## forms run in make test. ARGS="-scale 0.1 all" for a quick check.
reliability:
	./scripts/reliability.sh $(ARGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./gate/... ./monitor/...

clean:
	rm -rf bin out dist
