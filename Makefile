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
RACE_PKGS = . ./gate/... ./monitor/... ./control/... ./stage/... ./policer/... ./policy/... ./classify/... ./share/... ./client/... ./grpcsluice/... ./proxy/... ./cluster ./internal/localredis ./internal/grpctest ./internal/testkit
# (Not lab/dashboard: its one test, the dashboard in Chromium, skips
# under -race, and its race build compiles chromedp and the testbed's
# SQLite with the detector for nothing: minutes of a fresh machine's CPU.)
LAB_RACE_PKGS = ./reliability/...

.PHONY: all build lab image release release-check test vet vet-modules vet-tools vet-peerref vet-deploy lint lint-product lint-lab lint-all fmt-check demo bench reliability clean manifests

all: build lab

## build: the product binary, bin/sluice.
build:
	$(GO) build -o bin/sluice ./cmd/sluice

## lab: the lab's binary, bin/sluice-lab.
# The lab's records name the commit it was built from (lab/figure/record).
LAB_REV = $(shell git rev-parse HEAD 2>/dev/null)$(shell git rev-parse HEAD >/dev/null 2>&1 && ! git diff --quiet HEAD -- . ':(exclude)lab/results' ':(exclude)docs' && echo +dirty)
lab:
	$(GO) -C lab build -ldflags "-X github.com/sluicehq/sluice/lab/figure/record.stampedRevision=$(LAB_REV)" -o ../bin/sluice-lab ./cmd/sluice-lab

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
## all tests, -race on the concurrent packages, the dashboard in Chromium,
## the image with podman, the chart with Helm and the alert rules with
## promtool, the bookstore on a real PostgreSQL and cluster mode on a real
## redis-server (Chromium, podman, promtool, PostgreSQL and redis-server
## are installed from Debian when missing, while Go compiles). The order,
## and why it fits in ten minutes on two cores, is in scripts/test.sh.
## Test artifacts (the dashboard's screenshots) go to out/test/.
test:
	./scripts/test.sh

# PLAIN_ONLY names the tests of RACE_PKGS that mean nothing under the race
# detector (it drops sync.Pool entries, so allocation counts; and it slows
# the admin API's 10,000-request attack and the tenants' million-request
# bound tenfold, so those run smaller there; the shares' 20 s live
# measure through the proxy runs without it only). internal/doccheck holds this
# list to the tests that read raceEnabled. scripts/test.sh runs them, in PLAIN_ONLY_PKGS, without -race; the
# rest of RACE_PKGS runs under -race only.
PLAIN_ONLY = ^(TestAdminUnauthenticatedAttack|TestSharesLiveThroughProxy|TestClassifyDoesNotAllocate|TestTapHandleAllocations|TestStageTenantsBounded|TestStageTenantsCostFair|TestStageTenantsExpiredGiveBack)$$
PLAIN_ONLY_PKGS = ./proxy ./classify ./grpcsluice ./stage

# print-VAR prints a variable of this file (scripts/test.sh reads the
# package lists from here).
print-%:
	@echo '$($*)'

## vet: go vet in the four modules. vet-modules is the product's and the
## lab's, vet-tools the two tool modules' (vet-peerref: lab/tools/peerref;
## vet-deploy: lab/deploy). make test runs both in the background with
## the lint; vet-deploy last, compiling Helm and Kubernetes for the
## chart's tests, which run beside the cluster figures.
vet: vet-modules vet-tools

vet-modules:
	$(GO) vet ./...
	$(GO) -C lab vet ./...

vet-tools: vet-peerref vet-deploy

vet-peerref:
	$(GO) -C lab/tools/peerref vet ./...

vet-deploy:
	$(GO) -C lab/deploy vet ./...

## lint: staticcheck (pinned in lab/go.mod as a tool) over the product
## and the lab, the import groups (standard library; other modules;
## sluice's own), and that the product module depends on none of the
## lab's libraries. The two tool modules (lab/tools/peerref, lab/deploy)
## get go vet in make test and staticcheck in lint-all: staticcheck
## analyses every dependency, and Helm's and Kubernetes' cost a fresh CI
## machine a minute of its ten. lint-product and lint-lab are its two
## halves: make test runs both in the background from its start, at
## nice 19, on the CPU its tests leave idle (staticcheck's analysis of
## every dependency is most of a cold lint's time: about 270 s of CPU
## for the product on an empty cache).
lint: lint-product lint-lab

lint-product: bin/staticcheck
	bin/staticcheck ./...
	$(GO) -C lab run ./cmd/importgroups ..
	./scripts/check-lean.sh

lint-lab: bin/staticcheck
	cd lab && ../bin/staticcheck ./...

bin/staticcheck: lab/go.mod lab/go.sum
	$(GO) -C lab build -o ../bin/staticcheck honnef.co/go/tools/cmd/staticcheck

## lint-all: lint, and staticcheck over the two tool modules too.
lint-all: lint
	cd lab/tools/peerref && ../../../bin/staticcheck ./...
	cd lab/deploy && ../../bin/staticcheck ./...

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
