# delaystream — developer tasks. `make test` is the whole suite (unit +
# integration against real Redis) and installs redis-server when it is
# missing and apt-get is usable.

GO       ?= go
MODULES  := . ./examples ./integration ./bench ./cmd/delaystream ./contrib/prometheus ./contrib/otel ./contrib/cron
GOFLAGS_TEST ?= -race -count=1 -timeout 15m
# Library code, held to staticcheck and gocyclo by make lint.
LIBMODULES := . ./contrib/prometheus ./contrib/otel ./contrib/cron
TOOLBIN    := $(shell $(GO) env GOPATH)/bin
STATICCHECK_VERSION ?= v0.8.2
GOCYCLO_VERSION     ?= v0.6.0

.PHONY: all api api-check docs-check docs-index test test-python test-node node-client ensure-clients test-integration test-modules test-newest-go stress lint-tools ensure-tools chaos test-unit test-tls lint vet fmt ensure-redis bench tidy property fuzz fuzz-short

# Fuzz targets run one at a time (go test -fuzz takes one target), each
# for FUZZTIME with `make fuzz` and FUZZTIME_SHORT within `make test`.
# Crashers are written to the package's testdata/fuzz/<target>/ and then
# run as regression seeds by every go test.
# FUZZMINTIME bounds the minimizing of each new input (Go's default, 60s,
# can stall a target for most of a short run).
FUZZTIME       ?= 30s
FUZZTIME_SHORT ?= 1s
FUZZMINTIME    ?= 5s

all: lint test

## test: two lanes side by side, each printing its steps' times: the integration module (real servers and Clusters, mostly waiting on real time) then the core module's vet and tests on the newest Go release, in the background; every other module -race, the TLS subset and fuzz-short in the foreground. The background lane's output is printed after the other's. Either lane failing fails make test.
test: ensure-redis ensure-tools
	@start=$$(date +%s); log=$$(mktemp); \
	( s=$$(date +%s); rc=0; $(MAKE) -k --no-print-directory test-integration test-newest-go test-python test-node >$$log 2>&1 || rc=$$?; \
	  echo "== integration lane: rc=$$rc in $$(( $$(date +%s) - s ))s" >>$$log; exit $$rc ) & ipid=$$!; \
	s=$$(date +%s); rc=0; $(MAKE) --no-print-directory test-modules || rc=$$?; \
	echo "== modules lane: rc=$$rc in $$(( $$(date +%s) - s ))s"; \
	irc=0; wait $$ipid || irc=$$?; \
	echo "== integration lane output"; cat $$log; rm -f $$log; \
	echo "== make test: $$(( $$(date +%s) - start ))s (modules lane rc=$$rc, integration lane rc=$$irc)"; \
	[ $$rc = 0 ] && [ $$irc = 0 ]

# INTEGRATION_PARALLEL is how many integration tests run at once: they
# mostly wait on real time, each on servers of its own.
INTEGRATION_PARALLEL ?= 4

## test-integration: the integration module (real servers, Clusters, chaos short mode, Go beside the other languages' clients), -race, its tests INTEGRATION_PARALLEL at a time
test-integration: ensure-redis ensure-clients node-client
	@echo "== go test ./integration (-parallel $(INTEGRATION_PARALLEL))"; s=$$(date +%s); \
	rc=0; (cd integration && DELAYSTREAM_PYTHON=$(PYTHON) $(GO) test $(GOFLAGS_TEST) -parallel $(INTEGRATION_PARALLEL) ./...) || rc=$$?; \
	echo "== go test ./integration: rc=$$rc in $$(( $$(date +%s) - s ))s"; exit $$rc

# CORE_PARALLEL is how many of the core module's tests run at once in
# make test: most of them wait on real time.
CORE_PARALLEL ?= 8

## test-modules: every module but integration -race (the core first, then the others in one go test; make lint vets every module), and the TLS subset
test-modules: ensure-redis ensure-tools
	@rc=0; \
	echo "== go test . (-parallel $(CORE_PARALLEL))"; s=$$(date +%s); \
	$(GO) test $(GOFLAGS_TEST) -parallel $(CORE_PARALLEL) ./... || rc=1; \
	echo "== go test .: $$(( $$(date +%s) - s ))s"; \
	echo "== go test $(OTHER_MODULES)"; s=$$(date +%s); \
	$(GO) test $(GOFLAGS_TEST) $(addsuffix /...,$(OTHER_MODULES)) || rc=1; \
	echo "== go test $(OTHER_MODULES): $$(( $$(date +%s) - s ))s"; \
	echo "== go test (TLS): $(TLS_PKGS)"; s=$$(date +%s); \
	DELAYSTREAM_TLS=1 $(GO) test $(GOFLAGS_TEST) -skip '$(TLS_SKIP)' $(TLS_PKGS) || rc=1; \
	echo "== go test (TLS): $$(( $$(date +%s) - s ))s"; exit $$rc

# OTHER_MODULES are the modules test-modules runs after the core, in one
# go test (the workspace joins them), so that one module's slow test does
# not hold the next module's build back.
OTHER_MODULES := $(filter-out . ./integration,$(MODULES))

# TLS_PKGS are the core packages whose tests exercise what TLS changes:
# connection set-up through the whole stack (the root package), pub/sub
# (shardsub), a Cluster with tls-cluster and tls-replication (redistest,
# heal). make test-tls runs everything over TLS.
TLS_PKGS := . ./internal/redistest ./internal/shardsub ./internal/heal
# TLS_SKIP are the root package's feature tests (recurring schedules, Redis
# memory, locate, pause, limits, precision): they mostly wait on real time
# and use the same connections, scripts and reads as the root's other
# tests, which the TLS pass runs. make test-tls runs them over TLS too.
TLS_SKIP := Recurring|Memory|Evict|Locate|Pause|Limit|SlowWork|Precision

# GO_NEWEST is the newest Go release; go.mod's go line is the oldest
# supported. The toolchain is fetched through the module proxy.
GO_NEWEST ?= go1.27.1

## test-newest-go: go vet and the core module's unit tests on the newest Go release (GO_NEWEST)
test-newest-go: ensure-redis
	@echo "== $(GO_NEWEST): go vet and go test (core module)"; s=$$(date +%s); \
	GOTOOLCHAIN=$(GO_NEWEST) $(GO) vet ./... && \
	GOTOOLCHAIN=$(GO_NEWEST) $(GO) test -count=1 -timeout 15m -parallel $(CORE_PARALLEL) ./... && \
	echo "== $(GO_NEWEST): $$(( $$(date +%s) - s ))s"

# STRESS_RUNS is how many times make stress runs make test. Each run is
# the whole suite, both lanes at once, beside two CPU burners: on 2 cores
# about twice as long as make test alone, so the default keeps make stress
# near 25 min there. The margins it prints, not only its failures, are
# what catches a bound that fails one run in twenty: such a bound passes
# most runs narrowly.
STRESS_RUNS ?= 2

## stress: make test (both lanes at once) STRESS_RUNS times (default 2) beside two CPU-burning processes, recording every bounded assertion's margin (DELAYSTREAM_MARGINS, a temporary file unless set), then the ten closest margins: (bound-observed)/|bound|, below 0 failed
stress: ensure-redis ensure-tools
	@margins=$${DELAYSTREAM_MARGINS:-$$(mktemp /tmp/delaystream-margins.XXXXXX)}; export DELAYSTREAM_MARGINS=$$margins; \
	sh -c 'while :; do :; done' & b1=$$!; sh -c 'while :; do :; done' & b2=$$!; \
	trap 'kill $$b1 $$b2 2>/dev/null' EXIT; \
	start=$$(date +%s); failed=0; \
	for i in $$(seq 1 $(STRESS_RUNS)); do \
		echo "== stress run $$i of $(STRESS_RUNS): make test beside two CPU burners"; \
		$(MAKE) --no-print-directory test || failed=$$((failed + 1)); \
	done; \
	kill $$b1 $$b2; trap - EXIT; \
	echo "== stress: $$failed of $(STRESS_RUNS) runs failed, in $$(( $$(date +%s) - start ))s"; \
	echo "== the ten closest margins of $$(wc -l <$$margins) recorded in $$margins (margin, assertion, observed and bound of its closest run, runs recorded):"; \
	sort -g -k1,1 $$margins | awk -F '\t' '{ n[$$2]++ } !($$2 in first) { first[$$2] = $$0; order[++k] = $$2 } \
		END { for (i = 1; i <= k && i <= 10; i++) printf "%s\t(%d)\n", first[order[i]], n[order[i]] }'; \
	[ $$failed = 0 ]

## test-tls: the core module and integration with every test server on TLS only (DELAYSTREAM_TLS=1)
test-tls: ensure-redis
	@set -e; for m in . ./integration; do \
		echo "== go test $$m (TLS)"; \
		(cd $$m && DELAYSTREAM_TLS=1 $(GO) test $(GOFLAGS_TEST) ./...); \
	done

## test-unit: the core module only (miniredis and a local redis-server), without the race detector and 8 tests at a time (most wait on real time): what to run while editing (make test runs it with -race)
test-unit: ensure-redis
	$(GO) test -count=1 -parallel 8 -timeout 15m ./...

## property: the foreign-member property test at length (make test runs 100 rounds per lane kind)
property: ensure-redis
	DELAYSTREAM_PROPERTY_ROUNDS=$${ROUNDS:-2000} $(GO) test -count=1 -timeout 30m -run 'TestForeignMembersProperty' ./internal/mover/

## fuzz: every fuzz target of the core module, one after another, FUZZTIME each (default 30s)
fuzz:
	$(call run-fuzz,$(FUZZTIME))

## fuzz-short: every fuzz target for FUZZTIME_SHORT (default 1s); make test runs their seed corpora as tests
fuzz-short:
	$(call run-fuzz,$(FUZZTIME_SHORT))

# run-fuzz runs every fuzz target of the core module for $(1) each. Per
# package with fuzz targets it builds one instrumented test binary (go test
# -c -fuzz), lists the targets with it and runs them in the package
# directory (failing inputs go to its testdata/fuzz/) with go test's corpus
# cache: the same as `go test -fuzz` per target, without relinking for each.
# It keeps going after a failure and fails at the end naming the failed
# targets. A run whose only failure is a bare "context deadline exceeded"
# at the end of the fuzz time, with no failing input written, counts as
# passed: that is a race in Go's fuzz coordinator (go.dev/issue/75804,
# fixed in Go 1.27), not a finding.
define run-fuzz
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	cache=$$($(GO) env GOCACHE)/fuzz; start=$$(date +%s); n=0; failed=""; \
	for p in $$($(GO) list -f '{{.ImportPath}}@{{.Dir}}' ./...); do \
		pkg=$${p%@*}; dir=$${p#*@}; \
		cat $$dir/*_test.go 2>/dev/null | grep -q '^func Fuzz' || continue; \
		$(GO) test -c -fuzz . -o $$tmp/pkg.test $$pkg || { failed="$$failed $$pkg"; continue; }; \
		for name in $$($$tmp/pkg.test -test.list '^Fuzz'); do \
			n=$$((n + 1)); \
			echo "== fuzz $$name ($${pkg#github.com/delaystream/delaystream/}, $(1))"; \
			{ (cd $$dir && $$tmp/pkg.test -test.run '^$$' -test.fuzz "^$$name\$$" -test.fuzztime $(1) \
				-test.fuzzminimizetime $(FUZZMINTIME) -test.fuzzcachedir $$cache/$$pkg); echo "rc=$$?"; } 2>&1 | tee $$tmp/log; \
			if grep -q '^rc=0$$' $$tmp/log; then :; \
			elif grep -q '^    context deadline exceeded$$' $$tmp/log && ! grep -q 'Failing input written' $$tmp/log; then \
				echo "== fuzz $$name: Go's fuzz-time race (go.dev/issue/75804), not a finding"; \
			else failed="$$failed $$name"; fi; \
		done; \
	done; \
	echo "== fuzz: $$n targets, $(1) each, in $$(( $$(date +%s) - start ))s"; \
	if [ -n "$$failed" ]; then echo "fuzz failed:$$failed (failing inputs under testdata/fuzz/)"; exit 1; fi
endef

## lint: gofmt and go vet over every module; staticcheck and gocyclo -over 15 over the library code (the core module and contrib, tests excluded)
lint: vet lint-tools docs-check api-check
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(LIBMODULES); do (cd $$m && $(TOOLBIN)/staticcheck ./...); done
	@files=$$(for m in $(LIBMODULES); do (cd $$m && $(GO) list -f '{{range .GoFiles}}{{$$.Dir}}/{{.}} {{end}}' ./...); done); \
	out=$$($(TOOLBIN)/gocyclo -over 15 $$files); \
	if [ -n "$$out" ]; then echo "functions over cyclomatic complexity 15:"; echo "$$out"; exit 1; fi

# lint-tools installs staticcheck and gocyclo, at fixed versions, when absent.
lint-tools:
	@test -x $(TOOLBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@test -x $(TOOLBIN)/gocyclo || $(GO) install github.com/fzipp/gocyclo/cmd/gocyclo@$(GOCYCLO_VERSION)

## docs-check: the docs' links and anchors, results files, Go names, make targets and CLI commands and flags against the repository (part of make lint)
docs-check:
	@$(GO) run ./internal/doccheck
	@cd cmd/delaystream && $(GO) test -count=1 -run '^TestDocsNameRealCommands$$' .

## api-check: the public packages' exported API against its record in api/ (part of make lint): any difference fails until make api records it; once v1.0.0 is tagged, an incompatible one also needs a CHANGELOG section for a new major version
api-check:
	@$(GO) run ./internal/apicheck

## api: record the public packages' exported API in api/
api:
	@$(GO) run ./internal/apicheck -write

## docs-index: rewrite bench/results/README.md from the files in bench/results
docs-index:
	@$(GO) run ./internal/doccheck -write-index >/dev/null || true
	@$(GO) run ./internal/doccheck

vet:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

fmt:
	gofmt -w $$(git ls-files '*.go')

## chaos: the chaos program's long mode (integration/chaos): 100k messages, process kills, Redis pauses, connection kills and a restart from the AOF, checked against a ledger; CHAOSFLAGS=-fsync=everysec, -seed=N, -dir=D (make test runs its ~60 s short mode)
chaos: ensure-redis
	cd integration && $(GO) run ./chaos -mode long $(CHAOSFLAGS)

## ensure-redis: install redis-server (Redis >= 7.0) when absent
ensure-redis:
	@sh .ci/ensure-redis

# PYTHON is the interpreter of the Python client's tests: Debian's, which
# has the packages ensure-clients installs.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)

## ensure-clients: install what the clients' tests need (python3 with redis, msgpack and pytest; node and npm) when absent
ensure-clients:
	@PYTHON=$(PYTHON) sh .ci/ensure-clients

## test-python: the Python client's tests (pytest, on throwaway servers: a single one and a Cluster)
test-python: ensure-redis ensure-clients
	@echo "== pytest clients/python"; s=$$(date +%s); rc=0; \
	(cd clients/python && $(PYTHON) -m pytest -q -p no:cacheprovider tests) || rc=$$?; \
	echo "== pytest clients/python: rc=$$rc in $$(( $$(date +%s) - s ))s"; exit $$rc

## node-client: install the Node.js client's packages (npm ci, from its lock file, once) and build it
node-client: ensure-clients
	@cd clients/node && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run -s build

## test-node: the Node.js client's tests (node --test, on a throwaway server)
test-node: ensure-redis node-client
	@echo "== node --test clients/node"; s=$$(date +%s); rc=0; \
	(cd clients/node && node --test test/*.test.mjs) || rc=$$?; \
	echo "== node --test clients/node: rc=$$rc in $$(( $$(date +%s) - s ))s"; exit $$rc

## ensure-tools: install tmux and chromium (the CLI's and the web view's tests drive them) when absent
ensure-tools:
	@sh .ci/ensure-tools

## bench: the benchmark program (bench/), delaystream vs asynq; BENCHFLAGS=-quick for a ~1 min smoke run
bench:
	cd bench && $(GO) run . $(BENCHFLAGS)

tidy:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) mod tidy); done
