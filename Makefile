# Gantry's developer entry points. `make run` tries it out, `make test` is what CI runs.

GO ?= go
FUZZTIME ?= 60s
STORE_BENCH_JOBS ?= 20000
# staticcheck v0.8.2 is release 2026.2.2, the newest that builds with Go 1.26.
STATICCHECK_VERSION ?= v0.8.2

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/gantry-ci/gantry/internal/cli.version=$(VERSION)
GOBIN_DIR := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN_DIR)/staticcheck

.PHONY: build run deps depcheck test test-short k8s-up k8s-down bench-k8s example-images fuzz lint fmtcheck bench bench-go chaos chaos-cluster clean

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/gantry ./cmd/gantry

run: build
	bin/gantry validate examples/*
	@echo
	bin/gantry up --addr 127.0.0.1:8080 --data .gantry

# deps installs every tool the tests need (Debian packages and a pinned MinIO); test checks
# for them first and stops, naming what is missing, rather than letting tests fail one by one.
deps:
	bash scripts/deps.sh

depcheck:
	@bash scripts/deps.sh --check

# The slowest test packages come first: go test starts packages in the order listed (two
# at a time on two cores), so a slow one started last would run alone at the end. The
# cluster fault suite spends most of its minutes waiting on its containers.
SLOW_TEST_PKGS := ./internal/chaos/cluster ./internal/executor/kubernetes ./internal/cli ./internal/store/sqlite ./internal/api ./internal/agent \
	./internal/store/postgres ./internal/logs
# -race implies checkptr, which instruments every unsafe.Pointer conversion; modernc's
# SQLite, transpiled C, makes one at nearly every memory access, and checking them took
# about 40% of the CPU of the SQLite store's tests. Gantry's own code stays checked.
TEST_GCFLAGS := -gcflags='modernc.org/...=-d=checkptr=0'

# test is the full suite, what CI runs. Measured on 2 cores: 13.6 min for a warm clean-clone
# .ci/run at 8489177 on a quiet machine (~21 min at e9ab909 at load 6-9); a cold .ci/run (a fresh machine: deps, module download,
# first build) adds the Kubernetes cluster's first compile. The suite runs inside `scripts/k8s.sh run`, which
# starts a real single-node cluster for the kubernetes executor's tests (compiling it the
# first time, about 1,100 CPU-seconds) and always stops it afterwards.
test: depcheck fmtcheck
	@echo "make test: the full suite CI runs, with a real Kubernetes cluster: ~14-21 min with a warm build cache (the load decides); make test-short is the inner loop"
	$(GO) vet ./...
	bash scripts/k8s.sh run -- $(GO) test -race $(TEST_GCFLAGS) -count=1 -timeout=20m $(SLOW_TEST_PKGS) ./...
	$(GO) test -run='^$$' -fuzz='^FuzzCompile$$' -fuzztime=10s -fuzzminimizetime=0 ./internal/pipeline

# test-short is the inner loop: no -race, and -short skips the slow suites (the container
# cluster, the chaos kills, the browser tests); everything else runs. Not what CI runs.
test-short:
	$(GO) test -short ./...

# k8s-up starts the single-node Kubernetes cluster the kubernetes executor's tests run
# against (scripts/k8s.sh; compiled from the Go module proxy the first time) and prints
# the variables to export for `go test`; k8s-down stops it.
k8s-up:
	bash scripts/k8s.sh up
k8s-down:
	bash scripts/k8s.sh down

# bench-k8s measures the kubernetes executor on that cluster (BENCHMARKS.md "The kubernetes
# executor on a real cluster"): a job's pod against the shell executor, and 50 jobs at once.
bench-k8s:
	bash scripts/k8s.sh run -- $(GO) test -count=1 -run '^$$' -bench '^BenchmarkCluster' -benchtime 5x ./internal/executor/kubernetes

# example-images builds, from this machine alone (no registry), the images
# examples/containers.yml runs in: gantry-test/go:1.25, gantry-test/go:1.26 and
# gantry-test/busybox:1, busybox images that say their name in /etc/gantry-image.
example-images:
	bash scripts/example-images.sh

fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzCompile$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=0 ./internal/pipeline

lint: fmtcheck
	$(GO) vet ./...
	@test -x $(STATICCHECK) || { echo "installing staticcheck $(STATICCHECK_VERSION) into $(GOBIN_DIR)"; \
		GOBIN=$(GOBIN_DIR) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); }
	$(STATICCHECK) ./...

# fmtcheck fails, listing them, when any Go file is not gofmt-formatted.
fmtcheck:
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then echo "not gofmt-formatted (run gofmt -w):"; echo "$$files"; exit 1; fi

# gantry bench runs every named scenario against real coordinator processes on SQLite
# and on PostgreSQL (it creates and drops a database per scenario), prints a table, writes
# bench.json and rewrites the generated section of BENCHMARKS.md. The PostgreSQL is a
# throwaway cluster the bench starts with this machine's initdb, on PostgreSQL's
# defaults, unless BENCH_POSTGRES names a server whose user may CREATE DATABASE.
# BENCH_FLAGS passes more, e.g. BENCH_FLAGS='--scale 0.1 throughput-64'.
BENCH_POSTGRES ?=
BENCH_FLAGS ?=
bench: build
	bin/gantry bench $(if $(BENCH_POSTGRES),--postgres '$(BENCH_POSTGRES)') --json bench.json --markdown BENCHMARKS.md $(BENCH_FLAGS)

# Go benchmarks of the planner and of the store drivers alone. The store's run a fixed
# number of jobs: their setup (100,000 queued jobs for the claim-latency case) is too slow
# to repeat for every b.N the default mode would try.
bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/pipeline
	$(GO) test -run='^$$' -bench=Store -benchtime=$(STORE_BENCH_JOBS)x ./internal/store/sqlite ./internal/store/postgres

# The full chaos suite: 500 jobs per store on a coordinator and four workers that are
# SIGKILLed and restarted while the jobs run. `make test` runs a shortened form. No -race:
# the processes run at full speed, so the kills land on a realistic load.
chaos:
	$(GO) test -count=1 -v -timeout=10m -run='^TestChaos$$' ./internal/chaos -args -chaos.full

# The multi-host fault suite (internal/chaos/cluster): Gantry's own image in containers
# on a private Docker network (PostgreSQL, MinIO, three replicas, shell and docker
# workers), a seeded nemesis killing, pausing and partitioning them for DURATION while
# runs are submitted, then the checker of every invariant. `make test` runs its short
# form on a fixed seed. SEED (comma-separated: one cluster each) replays a run; without
# it a seed is drawn and printed. FAULTS narrows the kinds (kill-replica,pause-worker,...).
DURATION ?= 30m
SEED ?=
FAULTS ?=
chaos-cluster:
	$(GO) test -count=1 -v -timeout=0 -run='^TestCluster$$' ./internal/chaos/cluster -args \
		-cluster.duration=$(DURATION) $(if $(SEED),-cluster.seed=$(SEED)) $(if $(FAULTS),-cluster.faults=$(FAULTS))

clean:
	rm -rf bin
