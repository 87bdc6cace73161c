# pypto_pro: `make demo` runs the examples, `make test` runs every test. Both set everything up
# first (missing Debian packages, CMake configure, build); rebuilds are incremental.

PYTHON ?= /usr/bin/python3
BUILD ?= cmake-build
export PYTHONPATH := $(CURDIR)/python$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: all deps build demo test test-cpp test-python test-serial bench clean

all: build

deps:
	@scripts/install_deps.sh

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) -G Ninja -DPython3_EXECUTABLE=$(PYTHON) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/build.ninja
	@cmake --build $(BUILD)

# The device code every kernel compile shares is built first (once per machine and version, ~12 s
# on two CPUs): the first example then launches at once instead of waiting for it.
demo: build
	@$(PYTHON) -m pypto_pro cache warm
	@for f in examples/*.py; do echo "== $$f"; $(PYTHON) $$f || exit 1; done

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure -j2

# The Python tests on two worker processes (pytest-xdist, installed by deps): each worker has its
# own artefact tree. `make test-serial` runs them in one process (easier to debug, twice as long).
test-python: build
	$(PYTHON) -m pytest -q -n 2 tests/python

test-serial: build
	$(PYTHON) -m pytest -q tests/python

test: test-cpp test-python

bench: build
	@PYPTO_PRO_BENCH_DEPS=1 scripts/install_deps.sh
	@cmake --build $(BUILD) --target bench_matmul bench_poll
	$(PYTHON) benchmarks/bench.py

clean:
	rm -rf $(BUILD) build python/pypto_pro/_C*.so
