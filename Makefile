# Data Workers — see README.md.
SHELL := /bin/bash
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GO ?= go

.PHONY: build test demo bench lint fmt

## build: every binary into ./bin
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

## test: the whole suite (needs PostgreSQL at 127.0.0.1:5432 for the store tests)
test:
	$(GO) test -count=1 -timeout 20m ./...

## demo: story A end to end on the embedded default, over stdio, through all five agents
demo: build
	./bin/dw demo run

## bench: the benchmarks named in the issues, each reported as a ratio to its baseline
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./internal/... ./agents/...

## lint: formatting and vet
lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [[ -n "$$out" ]]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')
