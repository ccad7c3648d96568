# Thin driver over CMake. `make test` is what CI (.ci/run) calls.
#   make test       install missing Debian packages, configure, build, run every test, run
#                   them again on other BLAS and core kernels (test-other-kernels), then
#                   rebuild the torch-free core with ASan+UBSan and run its tests
#   make build      configure and build (Release) into $(BUILD)
#   make demo       grapheme-to-phoneme on CMUdict: fetch, train MoChA, evaluate, stream
#   make demo-speech  spoken commands from Debian's voices: make a corpus, train, WER per
#                   length, stream a held-out WAV word by word (recipes/spoken-commands)
#   make python     build the Python extension and make `import mona` work for $(PYTHON)
#   make bench      build and run the benchmarks (see bench/)
#   make clean      remove the build trees
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= 2
CMAKE_ARGS ?=
# The interpreter of the Python binding: Debian's, whose torch is libtorch-dev's build (a
# python3 found first on PATH, e.g. pyenv's, usually has no torch).
PYTHON     ?= /usr/bin/python3

.PHONY: all deps configure build python test test-release test-other-kernels test-sanitize bench demo demo-speech clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# The extension is written into python/mona/ (an in-place build), and a file mona.pth in
# $(PYTHON)'s user site-packages puts this checkout's python/ on its path: no root needed,
# edits to the .py files apply at once, and deleting that one file undoes it.
python: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMONA_BUILD_PYTHON=ON \
	  -DPython3_EXECUTABLE=$(PYTHON) $(CMAKE_ARGS)
	cmake --build $(BUILD) -j$(JOBS) --target mona_python
	@site=$$($(PYTHON) -c 'import site; print(site.getusersitepackages() if site.ENABLE_USER_SITE else "")') && \
	  if [ -z "$$site" ]; then \
	    echo "python: user site-packages disabled for $(PYTHON); use PYTHONPATH=$(CURDIR)/python"; \
	  else \
	    mkdir -p "$$site" && echo "$(CURDIR)/python" > "$$site/mona.pth" && \
	    echo "python: $$site/mona.pth -> $(CURDIR)/python" && \
	    $(PYTHON) -c 'import mona; print("python: import mona works:", mona.__file__)'; \
	  fi

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# The suites once more with OpenBLAS forced to another kernel family than the one it picks
# here (scripts/second-blas-core.sh) and the core kernels forced to the baseline
# (MONA_KERNEL_TARGET, include/mona/core/cpu.h), and glibc's libm kept off its AVX2 / FMA
# variants (GLIBC_TUNABLES): an assertion that holds for one CPU's
# rounding only fails here, not on someone else's machine. The tests already labelled
# baseline ran that way in test-release, and so did those labelled v3 (the core suites on
# the x86-64-v3 kernels, tests/core/CMakeLists.txt; the core uses no BLAS). Four labels run
# once: install (builds and runs consumer projects) and guards (the mona program's
# refusals, messages, signals and resumption, tests/tools/test_cli_guards.cc) assert
# nothing that depends on rounding; learning (tests/stream/CMakeLists.txt) has thresholds
# measured over every kernel family; commands (Debian's synthesizers and the spoken-commands
# corpus program with its smoke run, tests/audio/test_synthesis.cc and
# tests/tools/test_spoken_commands.cc) passed on the second kernels too (10 tests, 17 s)
# and runs once to keep make test within its time. So do the programs' own tests
# (mona_tools_test_*: their messages, files and exit codes, and comparisons of two runs on
# one machine; 40 s of the second pass), whose kernels the library suites run on both.
test-other-kernels: build
	@second=$$(bash scripts/second-blas-core.sh $(BUILD)/bin/mona) && \
	  echo "test-other-kernels: OPENBLAS_CORETYPE=$$second MONA_KERNEL_TARGET=baseline" && \
	  cd $(BUILD) && OPENBLAS_CORETYPE=$$second MONA_KERNEL_TARGET=baseline \
	  GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F \
	  ctest --output-on-failure -j$(JOBS) -LE 'baseline|v3|install|guards|learning|commands' -E '^mona_tools_test_'

test-sanitize: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DMONA_SANITIZE=ON -DMONA_WITH_TORCH=OFF
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS)

test: test-release test-other-kernels test-sanitize

bench: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMONA_BUILD_BENCH=ON $(CMAKE_ARGS)
	cmake --build $(BUILD) -j$(JOBS)
	@if [ -x $(BUILD)/bench/run-benchmarks ]; then $(BUILD)/bench/run-benchmarks; \
	 else echo "no benchmarks built yet (bench/ is empty)"; fi

demo:
	BUILD=$(BUILD) JOBS=$(JOBS) bash scripts/demo.sh

demo-speech:
	BUILD=$(BUILD) JOBS=$(JOBS) bash scripts/demo-speech.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
