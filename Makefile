# Quick start:
#   make bench    Release build in build/release, run the benchmark suite
#                 (bench/run.py: qslab against glibc, jemalloc, tcmalloc, mimalloc);
#                 make bench-quick: one round at fewer sizes, a first look;
#                 make bench ONLY=slub.pair: one benchmark (or a list, a group: slub)
#   make test     normal, ASan+UBSan and TSan builds, each tested through ctest,
#                 with per-CPU and per-thread queues (QSLAB_OWNER=cpu, thread)
#                 and with each front end (QSLAB_FRONT=slqb, slub, slab, slob)
#   make fuzz     libFuzzer build (clang, ASan+UBSan) in build/fuzz, each target
#                 of fuzz/ run FUZZ_TIME seconds (default 60; fuzz/README.md)
#
# Other targets: make examples (examples/, built against the build tree and
# through pkg-config), make install PREFIX=/dir, make clean.
# CMake does the real work; this file only names the build directories and the order.

PREFIX ?= /usr/local
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
# Two tests per CPU: many tests wait part of the time (a purger tick, a
# control timeout, a child process, tmux), so two per CPU keep the CPUs busy.
# On the 2-CPU VMs one mode of the normal build took 88 s with -j2 (the CPUs
# 81% busy) and 66 s with -j4 (95%).  On a VM shared with other work -j4
# also takes a larger share of the CPUs: ASan's per-thread concurrency run,
# alternated, 44.8 and 52.2 s with -j2, 37.4 and 35.4 s with -j4 (load
# average 33 to 52).
CTEST_JOBS ?= $(shell echo $$(( 2 * $(JOBS) )))
CTEST   = ctest -j$(CTEST_JOBS) --output-on-failure
# A build's later ctest runs, in other modes: without the tests labelled
# "once", which no run-time mode changes (the layout checks, package_man,
# preload_exports: they read sources, object files and man pages;
# package_install and examples_build: installs and builds against it;
# preload_qslab_run: the wrapper's arguments; the tools' refusals of other
# processes and qslabtop's screen: tests/tools/CMakeLists.txt), and with
# QSLAB_TEST_AGAIN=1, which leaves glibc's and the peers' columns out of
# bench_smoke (the modes change qslab alone; bench/CMakeLists.txt).
CTEST_AGAIN = QSLAB_TEST_AGAIN=1 $(CTEST) -LE once
# Tests of one front end (labels front-slab, front-slub, front-slob: their
# caches are pinned to it whatever QSLAB_FRONT says; CMakeLists.txt) run in
# the runs whose QSLAB_FRONT names their front end, in both owner kinds, and
# in the guarded-sampling runs; not in the others, where they would run
# the same pinned caches again, nor under QSLAB_DEBUG, where their caches
# are debug caches and they stop at once (tf_debug_skip).  $(call
# pinned_but,FRONT): the -LE regex of the labels of the other front ends'
# tests (FRONT empty: all of them); $(call again,FRONT): CTEST_AGAIN
# without those.
PINNED     = front-slab front-slub front-slob
EMPTY      =
SPACE      = $(EMPTY) $(EMPTY)
pinned_but = $(subst $(SPACE),|,$(filter-out front-$(1),$(PINNED)))
again      = QSLAB_TEST_AGAIN=1 $(CTEST) -LE 'once|$(call pinned_but,$(1))'
# Tools the build needs: when one is missing, scripts/install-deps installs it;
# so too when a header is (libc6-dev's; libncurses-dev's, for qslabtop).
TOOLS   = cmake ninja cc gcc c++ g++ make setarch python3 git nm awk sort valgrind pkg-config tmux \
          gnuplot
HEADERS = /usr/include/stdio.h /usr/include/curses.h

# make bench: QUICK=1 for the quick mode (fewer sizes, 3 rounds); ONLY=TEST[,TEST]
# for some benchmarks (run.py --only: slub.pair, prodcons, slub, fronts,
# programs.sqlite, ...); PEERS=0 not to install missing peer allocators (as
# root, scripts/install-peers does by default); BENCH_ARGS for more options of
# bench/run.py, e.g. BENCH_ARGS="--rounds 9".  make bench-quick: the quick mode
# in one round (run.py --quick --rounds 1), ONLY too.
BENCH_ARGS ?=
QUICK      ?=
ONLY       ?=
BENCH_RUN   = python3 bench/run.py --bin-dir build/release/bench \
              --qslab-lib build/release/src/malloc/libqslab-malloc.so
BENCH_OPTS  = $(if $(filter-out 0 no,$(QUICK)),--quick) $(if $(ONLY),--only $(ONLY))

.PHONY: all deps bench bench-quick bench-peers examples test test-normal test-asan test-tsan \
        install clean fuzz
.NOTPARALLEL:
MAKEFLAGS += --no-print-directory

all: test

deps:
	@for t in $(TOOLS); do command -v $$t >/dev/null 2>&1 || { scripts/install-deps; exit 0; }; done; \
	for h in $(HEADERS); do [ -e $$h ] || { scripts/install-deps; exit 0; }; done

# $(call build,DIR,CMAKE-ARGS[,TARGETS]): configure (cheap when nothing changed)
# and build TARGETS, or everything.  New build directories use Ninja: on the
# 2-CPU VMs the normal build took 32 s with it and 51 s with CMake's
# Makefiles (52 and 89 CPU-s: make and the cmake processes it starts for
# every target cost more than the links), the ASan build 44 s and 53 s.  A
# directory configured before keeps its generator (CMake refuses a change).
GENERATOR ?= Ninja
define build
cmake -S . -B $(1) $(if $(wildcard $(1)/CMakeCache.txt),,-G "$(GENERATOR)") $(2)
cmake --build $(1) -j $(JOBS) $(if $(3),--target $(3))
endef

bench: deps bench-peers
	$(call build,build/release,-DCMAKE_BUILD_TYPE=Release,bench)
	$(BENCH_RUN) $(BENCH_OPTS) $(BENCH_ARGS)

bench-quick: deps bench-peers
	$(call build,build/release,-DCMAKE_BUILD_TYPE=Release,bench)
	$(BENCH_RUN) --quick --rounds 1 $(if $(ONLY),--only $(ONLY)) $(BENCH_ARGS)

# make examples: the programs of examples/ built against the build tree
# (build/release: its headers and libqslab.a) and through pkg-config from an
# install staged in build/examples/stage, and run (examples/build-examples;
# ctest runs the same script, test examples_build).
examples: deps
	$(call build,build/release,-DCMAKE_BUILD_TYPE=Release)
	examples/build-examples build/release build/examples

# Peers, gnuplot and the programs of the programs section (sqlite3,
# redis-tools): installed when missing if we are root (the runner says which
# allocators and programs it did not find either way).
bench-peers:
	@if [ "$(PEERS)" != 0 ] && ! scripts/install-peers --check 2>/dev/null; then \
	    if [ "$$(id -u)" -eq 0 ]; then \
	        scripts/install-peers || echo "make bench: install-peers failed, going on"; \
	    else \
	        echo "make bench: not root: run scripts/install-peers to add the missing peers"; \
	    fi; \
	fi

test: test-normal test-asan test-tsan

# Every test runs in both owner kinds (QSLAB_OWNER=cpu: per-CPU queues
# through rseq; thread: per-thread queues) and with every front end
# (QSLAB_FRONT: slqb, the default, slub and slab in both kinds; slob, which
# has no owners) in the normal build.  Each build also runs the concurrency
# tests with every cache a debug cache (QSLAB_DEBUG=FZPU: docs/debugging.md),
# which must report nothing, and with guarded sampling at one allocation in
# 50 (QSLAB_GUARD_SAMPLE=50: docs/debugging.md, "Guarded sampling"), which
# must report nothing either.  Every test that runs qslab's code runs in every
# mode, but for the tests of one front end (PINNED, above) and qslab's own
# build on qslab (the default mode: tests/preload/self_build.sh); the first
# run of each build leaves out only the tests of one front end, the later
# ones ($(CTEST_AGAIN)) what no mode changes too (above).
test-normal: deps
	$(call build,build/test,)
	cd build/test && QSLAB_OWNER=cpu $(CTEST) -LE '$(call pinned_but,)'
	cd build/test && QSLAB_OWNER=thread $(call again,)
	cd build/test && QSLAB_FRONT=slub QSLAB_OWNER=cpu $(call again,slub)
	cd build/test && QSLAB_FRONT=slub QSLAB_OWNER=thread $(call again,slub)
	cd build/test && QSLAB_FRONT=slab QSLAB_OWNER=cpu $(call again,slab)
	cd build/test && QSLAB_FRONT=slab QSLAB_OWNER=thread $(call again,slab)
	cd build/test && QSLAB_FRONT=slob $(call again,slob)
	cd build/test && QSLAB_DEBUG=FZPU $(call again,) -L concurrency
	cd build/test && QSLAB_GUARD_SAMPLE=50 $(CTEST_AGAIN) -L concurrency

# ASan+UBSan: every test with per-CPU queues, the concurrency ones with
# per-thread queues too, the integration and concurrency ones with SLUB,
# SLAB and SLOB.
# LeakSanitizer checks the first run only: it sees memory from libc's malloc
# (the tests' and tools' own; qslab's comes from mmap), which no mode
# changes, and its check at every process's exit (about 60 ms and 2,400
# page faults) was a third of the later runs' time: 36.6 s -> 26.3 s for
# the SLUB run, whose tools tests start some 120 processes.
ASAN_NOLEAK = ASAN_OPTIONS=detect_leaks=0
test-asan: deps
	$(call build,build/asan,-DQSLAB_SANITIZE=address)
	cd build/asan && QSLAB_OWNER=cpu $(CTEST) -LE '$(call pinned_but,)'
	cd build/asan && $(ASAN_NOLEAK) QSLAB_OWNER=thread $(CTEST_AGAIN) -L concurrency
	cd build/asan && $(ASAN_NOLEAK) QSLAB_FRONT=slub $(call again,slub) -L 'integration|concurrency'
	cd build/asan && $(ASAN_NOLEAK) QSLAB_FRONT=slab $(call again,slab) -L 'integration|concurrency'
	cd build/asan && $(ASAN_NOLEAK) QSLAB_FRONT=slob $(call again,slob) -L 'integration|concurrency'
	cd build/asan && $(ASAN_NOLEAK) QSLAB_DEBUG=FZPU $(call again,) -L concurrency
	cd build/asan && $(ASAN_NOLEAK) QSLAB_GUARD_SAMPLE=50 $(CTEST_AGAIN) -L concurrency

# Only the tests labelled "concurrency" (stress, *thread*, *remote*, *numa*),
# and only the programs they run are built (target concurrency_tests; the
# build took 47 s with every program, 22 s with these, on the 2-CPU VMs).
# CMakeLists.txt runs sanitizer tests under `setarch -R`, so TSan works on
# kernels with high mmap randomisation too.
# TSan follows the per-CPU queues' restartable sequences through
# annotations (src/owner/percpu.h): both owner kinds.
test-tsan: deps
	$(call build,build/tsan,-DQSLAB_SANITIZE=thread,concurrency_tests)
	cd build/tsan && QSLAB_OWNER=cpu $(CTEST) -L concurrency -LE '$(call pinned_but,)'
	cd build/tsan && QSLAB_OWNER=thread $(call again,) -L concurrency
	cd build/tsan && QSLAB_FRONT=slub QSLAB_OWNER=cpu $(call again,slub) -L concurrency
	cd build/tsan && QSLAB_FRONT=slub QSLAB_OWNER=thread $(call again,slub) -L concurrency
	cd build/tsan && QSLAB_FRONT=slab QSLAB_OWNER=cpu $(call again,slab) -L concurrency
	cd build/tsan && QSLAB_FRONT=slab QSLAB_OWNER=thread $(call again,slab) -L concurrency
	cd build/tsan && QSLAB_FRONT=slob $(call again,slob) -L concurrency
	cd build/tsan && QSLAB_DEBUG=FZPU $(call again,) -L concurrency
	cd build/tsan && QSLAB_GUARD_SAMPLE=50 $(CTEST_AGAIN) -L concurrency

# make fuzz: FUZZ_TIME seconds per target (default 60), FUZZ_JOBS parallel
# fuzzing processes (default: the CPUs), FUZZ_TARGETS (default "ops misuse control"),
# FUZZ_ARGS more libFuzzer options.  clang (and libFuzzer's runtime) are
# installed when missing (fuzz/install-clang).  Each target runs over
# build/fuzz/corpus-<target>, seeded from fuzz/corpus/<target>; found crashes
# land in build/fuzz/artifacts-<target>/ (the run then fails).
FUZZ_TIME    ?= 60
FUZZ_JOBS    ?= $(JOBS)
FUZZ_TARGETS ?= ops misuse control
FUZZ_ARGS    ?=
fuzz: deps
	@fuzz/install-clang
	$(call build,build/fuzz,-DQSLAB_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++,$(addprefix fuzz_,$(FUZZ_TARGETS)))
	fuzz/run-fuzz build/fuzz "$(FUZZ_TIME)" "$(FUZZ_JOBS)" "$(FUZZ_TARGETS)" $(FUZZ_ARGS)

install: deps
	$(call build,build/release,-DCMAKE_BUILD_TYPE=Release)
	cmake --install build/release --prefix $(abspath $(PREFIX))

clean:
	rm -rf build
