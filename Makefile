# Data Workers — see README.md.
SHELL := /bin/bash
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GO ?= go

.PHONY: build test demo bench lint fmt fuzz

## build: every binary into ./bin, under the same lock start-agent.sh takes
## (so a client connecting meanwhile waits for this build instead of racing it)
build:
	GO="$(GO)" ./start-agent.sh --build

## test: the whole suite (needs PostgreSQL at 127.0.0.1:5432 for the store tests). The tests never
## see your DW_HOME or DW_CONFIG: they get a fresh directory, removed afterwards. CI passes a sentinel
## directory in DW_TEST_HOME (and a dw.yaml that does not parse in DW_TEST_CONFIG) and checks that no
## test wrote there or read it: each test must use its own temporary directories.
test:
	@home="$${DW_TEST_HOME:-$$(mktemp -d)}"; \
	DW_HOME="$$home" DW_CONFIG="$${DW_TEST_CONFIG:-}" $(GO) test -count=1 -timeout 20m ./...; rc=$$?; \
	if [[ -z "$${DW_TEST_HOME:-}" ]]; then rm -rf "$$home"; fi; exit $$rc

## demo: story A end to end on the embedded default, over stdio, through all five agents
demo: build
	./bin/dw demo run

## bench: the benchmarks named in the issues, each reported as a ratio to its baseline
## (the end-to-end ones, internal/benchmcp, drive the binaries make build put in ./bin),
## ending with one table of every end-to-end row and its goal, "not measured" where none ran.
## Only the packages that have benchmarks run, one at a time (-p 1: two benchmarks at once would
## measure each other); each end-to-end benchmark runs alone from one test binary with a budget of
## its own (BENCH_TIMEOUT, as each in-process package has), so a slow one cannot starve the rest.
## The 10M-row DuckDB table the backfill and quality rows share is written once per run
## (DW_BENCH_BACKFILL_DUCKDB=FILE keeps it between runs).
BENCH_TIMEOUT ?= 20m
bench: build
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; rc=0; table="$$tmp/table.jsonl"; \
	pkgs=$$(grep -rl --include='*_test.go' '^func Benchmark' internal agents cmd | xargs -n1 dirname | sort -u | grep -vx 'internal/benchmcp' | sed 's|^|./|'); \
	echo "== in-process benchmarks: $$(echo $$pkgs)"; \
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 1x -timeout $(BENCH_TIMEOUT) $$pkgs || rc=1; \
	$(GO) test -c -o "$$tmp/benchmcp.test" ./internal/benchmcp || exit 1; \
	for fn in $$(sed -n 's/^func \(Benchmark[A-Za-z0-9_]*\)(.*/\1/p' internal/benchmcp/*_test.go); do \
		echo "== $$fn (internal/benchmcp, budget $(BENCH_TIMEOUT))"; \
		(cd internal/benchmcp && DW_BENCH_TABLE="$$table" DW_BENCH_BIN_DIR="$(CURDIR)/bin" \
			DW_BENCH_BACKFILL_DUCKDB="$${DW_BENCH_BACKFILL_DUCKDB:-$$tmp/events.duckdb}" \
			"$$tmp/benchmcp.test" -test.run '^$$' -test.bench "^$$fn\$$" -test.benchtime 1x -test.timeout $(BENCH_TIMEOUT)) || rc=1; \
	done; \
	$(GO) run ./internal/benchmcp/benchtable "$$table"; exit $$rc

## fuzz: every fuzz target (func FuzzXxx in *_test.go) for FUZZTIME each; `make test`
## replays their seed corpora (testdata/fuzz/FuzzXxx and the f.Add seeds) without fuzzing.
## A failure with a crasher written fails; a bare "context deadline exceeded" at the
## deadline is Go 1.26's fuzz-coordinator race on a loaded machine (golang/go#75804), not a find.
FUZZTIME ?= 20s
fuzz:
	@set -e; log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	for f in $$(grep -rl --include='*_test.go' '^func Fuzz' internal agents cmd | sort); do \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
			echo "== $$fn (./$$(dirname "$$f"), $(FUZZTIME))"; \
			if ! $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) "./$$(dirname "$$f")" >"$$log" 2>&1; then \
				if grep -q 'context deadline exceeded' "$$log" && ! grep -q 'Failing input written' "$$log"; then \
					echo "   (deadline race in Go's fuzz coordinator, no crasher; counted as a pass)"; \
				else grep -v '^fuzz: elapsed' "$$log"; exit 1; fi; \
			else tail -n 2 "$$log"; fi; \
		done; \
	done

## lint: formatting and vet
lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [[ -n "$$out" ]]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')
