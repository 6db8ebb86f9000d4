# delaystream — developer tasks. `make test` is the whole suite (unit +
# integration against real Redis) and installs redis-server when it is
# missing and apt-get is usable.

GO       ?= go
MODULES  := . ./examples ./integration ./bench
GOFLAGS_TEST ?= -race -count=1 -timeout 15m

.PHONY: all test test-unit lint vet fmt ensure-redis bench tidy property

all: lint test

## test: vet, then go test -race over every module (integration included)
test: ensure-redis vet
	@set -e; for m in $(MODULES); do \
		echo "== go test $$m"; \
		(cd $$m && $(GO) test $(GOFLAGS_TEST) ./...); \
	done

## test-unit: the core module only (miniredis and a local redis-server)
test-unit: ensure-redis
	$(GO) test $(GOFLAGS_TEST) ./...

## property: the foreign-member property test at length (make test runs 100 rounds per lane kind)
property: ensure-redis
	DELAYSTREAM_PROPERTY_ROUNDS=$${ROUNDS:-2000} $(GO) test -count=1 -timeout 30m -run 'TestForeignMembersProperty' ./mover/

## lint: gofmt and go vet over every module
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

fmt:
	gofmt -w $$(git ls-files '*.go')

## ensure-redis: install redis-server (Redis >= 7.0) when absent
ensure-redis:
	@sh .ci/ensure-redis

## bench: the benchmark program (bench/), delaystream vs asynq; BENCHFLAGS=-quick for a ~1 min smoke run
bench:
	cd bench && $(GO) run . $(BENCHFLAGS)

tidy:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) mod tidy); done
