SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO      ?= go
BIN     := bin/ferry
STACK   := deploy/stack.sh
KAFKA   ?= 0
CLUSTER ?= 0
LEGS    ?= modern legacy
PKGS    ?= ./...
GOFILES_CMD := find . -name '*.go' -not -path './.stack/*' -not -path './bin/*' -not -path './vendor/*' -print0

.PHONY: build stack-up stack-down stack-status test fmt fmt-check vet demo perf chaos torture clean

## build: compile bin/ferry
build:
	$(GO) build -o $(BIN) ./cmd/ferry

## stack-up: start the local PostgreSQL (55432) and ClickHouse (19000); writes .stack/env
##           KAFKA=1 also starts kfake, an in-memory TEST broker, on 19092
##           CLUSTER=1 also starts a ClickHouse cluster (ZooKeeper + 4 servers, 2 shards x 2 replicas) on 19100-19142
stack-up:
	KAFKA=$(KAFKA) CLUSTER=$(CLUSTER) bash $(STACK) up

## stack-down: stop the local stack
stack-down:
	bash $(STACK) down

## stack-status: tell what of the local stack runs
stack-status:
	bash $(STACK) status

## fmt: gofmt the tree in place
fmt:
	$(GOFILES_CMD) | xargs -0 -r gofmt -w

## fmt-check: fail when gofmt would change a file
fmt-check:
	@files="$$($(GOFILES_CMD) | xargs -0 -r gofmt -l)"; \
	if [ -n "$$files" ]; then echo "gofmt needed on:"; echo "$$files"; exit 1; fi; \
	echo "gofmt: ok"

## vet: go vet
vet:
	$(GO) vet ./...

## test: start the stack, then gofmt check, go vet and go test against it, once per ClickHouse
##       server (26.7, then 18.16; LEGS=modern or LEGS=legacy for one, PKGS=./replicator for some)
test: stack-up fmt-check
	. .stack/env && $(GO) vet ./... && GO="$(GO)" LEGS="$(LEGS)" PKGS="$(PKGS)" bash deploy/testlegs.sh

## demo: build, start the stack and run the demo (FOLLOW=1: keep writing and replicating until Ctrl-C)
demo:
	FOLLOW="$(FOLLOW)" bash deploy/demo.sh

## chaos: the fault-injection suite, long mode (20 SIGKILLs, 30 s ClickHouse outage, transactions up to
##        10,000 rows; about 10 min; needs root, initdb and clickhouse-server; private servers), then one
##        10M-row transaction through the local stack (peak RSS logged). Table: CHAOS_REPORT (.stack/chaos-report.md)
chaos: stack-up
	CHAOS=full CHAOS_REPORT="$${CHAOS_REPORT:-$(CURDIR)/.stack/chaos-report.md}" $(GO) test -count=1 -v -timeout 60m ./deploy/chaostest
	. .stack/env && FERRY_BIG_TX=10000000 $(GO) test -count=1 -v -timeout 60m -run 'TestLargeTransaction$$' ./replicator

## perf: build, start the stack and measure catch-up, initial load, steady-state latency, CPU and memory
##       into docs/PERFORMANCE.md, a section per ClickHouse server (CH=modern|legacy|both, default both;
##       RUNS=3; QUICK=1 is a smoke run; logs in .stack/perf/)
perf: build stack-up
	. .stack/env && for leg in $$(if [ "$(CH)" = both ]; then echo modern legacy; else echo "$(CH)"; fi); do \
	  case $$leg in modern) url="$$FERRY_CH_MODERN_URL" ;; legacy) url="$$FERRY_CH_LEGACY_URL" ;; \
	  *) echo "CH=$$leg: want modern, legacy or both" >&2; exit 2 ;; esac; \
	  FERRY_CH_URL="$$url" PERF_LEG=$$leg bash deploy/perf.sh || exit 1; done

## torture: random seeded rounds against the running local stack (make stack-up first) for DURATION
##          (default 20m; SEED=n fixes the first seed; CH=modern|legacy|both, default both), then a table
##          of rounds, operations, faults, rows checked and disagreements; failing plans in TORTURE_DIR;
##          AVOID=list names known bugs to steer clear of (torture.Known; default: the test's own list);
##          RESTARTS=n: one round in n restarts servers, private ones (default 2; 0: none; needs root);
##          TORTURE_KAFKA=auto|always|never: rounds through Kafka (default auto: one round in four)
DURATION    ?= 20m
SEED        ?= 0
CH          ?= both
TORTURE_DIR ?= $(CURDIR)/.stack/torture
torture:
	if [ -f .stack/env ]; then . .stack/env; fi; \
	$(GO) test -count=1 -v -timeout 0 -run 'TestTorture$$' ./torture \
	  -torture.duration=$(DURATION) -torture.seed=$(SEED) -torture.ch=$(CH) -torture.dir=$(TORTURE_DIR) \
	  $(if $(AVOID),-torture.avoid=$(AVOID)) $(if $(RESTARTS),-torture.restarts=$(RESTARTS)) \
	  $(if $(TORTURE_KAFKA),-torture.kafka=$(TORTURE_KAFKA))

## clean: remove build output (the stack's data stays; use stack-down first)
clean:
	rm -rf bin
