# The project's entry points. Every target that builds first installs the Debian packages that are missing.
#   make conform the conformance suite against the reference broker, over each transport (fire, fires, ws,
#                wss); reports under reports/
#   make test    everything CI runs: unit tests, vector checks, the conformance suite and its fault check,
#                fuzz corpus replay and short fuzz runs
#   make fuzz    every fuzz target for FUZZ_SECONDS each (default 600)
#   make build   the normal build (g++), in build/
#   make coverage  unit tests with gcov, an lcov HTML report in build-coverage/coverage/
#   make install the built binaries and the suite's data under PREFIX (default /usr/local; DESTDIR works)
#   make package the Debian package, $(BUILD)/firemq_VERSION_ARCH.deb (CPack)

BUILD ?= build
FUZZ_BUILD ?= build-fuzz
COVERAGE_BUILD ?= build-coverage
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 600
PREFIX ?= /usr/local

.PHONY: all deps build conform test unit-test fuzz-build fuzz-test fuzz coverage install package clean

all: build

deps:
	@bash scripts/install-deps.sh

# Ninja when it is there (install-deps installs it) for a new build tree; a tree configured before keeps its generator.
GENERATOR = $(if $(wildcard $(BUILD)/CMakeCache.txt),,$(if $(shell command -v ninja 2> /dev/null),-G Ninja))
CONFIGURE = cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null

build: deps
	@$(CONFIGURE)
	@cmake --build $(BUILD) -j $(JOBS)

# Only the two programs a conformance run needs, not the tests, tools and example drivers: a fresh clone's first
# verdict comes after about two thirds of the whole build's CPU time (582 of 914 CPU seconds), 4 minutes on 2 cores
# (docs/ARCHITECTURE.md, "Dependencies").
# CONFORM_ARGS passes flags through, e.g. make conform CONFORM_ARGS="--group framing -v"
conform: deps
	@$(CONFIGURE)
	@cmake --build $(BUILD) -j $(JOBS) --target firemq-broker firemq-conform
	$(BUILD)/harness/firemq-conform --transport all --reports reports $(CONFORM_ARGS)

unit-test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

fuzz-build: deps
	@cmake -S . -B $(FUZZ_BUILD) $(if $(wildcard $(FUZZ_BUILD)/CMakeCache.txt),,$(if $(shell command -v ninja 2> /dev/null),-G Ninja)) -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DFIREMQ_FUZZ=ON -DFIREMQ_TESTS=OFF > /dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS)

# Replays every corpus and runs each target briefly, so that a regression fails CI.
fuzz-test: fuzz-build
	ctest --test-dir $(FUZZ_BUILD) --output-on-failure -j $(JOBS)

# Both of the above, with the fuzz tree built in the background while the normal build and its tests run.
test: deps
	@bash scripts/test.sh $(BUILD) $(FUZZ_BUILD) $(JOBS)

fuzz: fuzz-build
	bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

coverage: deps
	@cmake -S . -B $(COVERAGE_BUILD) -DCMAKE_BUILD_TYPE=Debug -DFIREMQ_COVERAGE=ON > /dev/null
	@cmake --build $(COVERAGE_BUILD) -j $(JOBS)
	ctest --test-dir $(COVERAGE_BUILD) -j $(JOBS)
	lcov --quiet --capture --directory $(COVERAGE_BUILD) --output-file $(COVERAGE_BUILD)/coverage.info \
	  --include '$(CURDIR)/protocol/*' --include '$(CURDIR)/reference-broker/*' --include '$(CURDIR)/harness/*' --include '$(CURDIR)/tools/*' \
	  --exclude '*_test.cpp'
	genhtml --quiet $(COVERAGE_BUILD)/coverage.info --output-directory $(COVERAGE_BUILD)/coverage
	@lcov --summary $(COVERAGE_BUILD)/coverage.info

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

package: build
	cd $(BUILD) && cpack

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) $(COVERAGE_BUILD)
