# The worker image for scoring on a Beam runner that takes custom containers (Dataflow, Flink, Spark):
# evaluation/beam_scoring.py runs the scorer's units on workers, and each worker needs what
# `make toolchains` installs here (the compilers and runtimes of the 12 scoring languages, bubblewrap)
# and codelm itself. Beam's own Python 3.11 SDK image is the base (Debian 12, the runner's harness at
# /opt/apache/beam/boot), at the Beam version codelm pins.
#
#   docker build -t REGION-docker.pkg.dev/PROJECT/REPO/codelm-scoring:latest .
#   docker push REGION-docker.pkg.dev/PROJECT/REPO/codelm-scoring:latest
#
# The sandbox (bubblewrap) creates user, mount, PID and network namespaces: the container must be
# allowed to (privileged, or CAP_SYS_ADMIN with an unconfined seccomp profile). A worker that cannot
# sandbox fails its first unit with a message that says so (execution.check_sandbox). Not built or
# run here: this machine has no container runtime (docs/scoring.md).
FROM apache/beam_python3.11_sdk:2.77.0

# The Debian packages of `make toolchains` (Makefile: TOOLCHAIN_PACKAGES and TOOLCHAIN_COMMANDS), and
# make, git and util-linux (setpriv, prlimit) for the sandbox; libmagic1 for ScanCode (the corpus
# builder's licence detector, data/licenses.py).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bubblewrap lua5.3 php-cli golang-go rustc mono-mcs mono-runtime r-base-core ghc \
      lua-unit libjavatuples-java golang-github-stretchr-testify-dev \
      g++ openjdk-17-jdk-headless nodejs npm make util-linux ca-certificates libmagic1 \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/codelm
COPY pyproject.toml README.md Makefile ./
COPY storage.py languages.py gin_flags.py gin_train.py quiet.py ./
COPY model model
COPY data data
COPY objectives objectives
COPY training training
COPY sampling sampling
COPY sandbox sandbox
COPY evaluation evaluation
COPY experiments experiments
COPY tpu tpu
# The TypeScript compiler into .toolchains/npm (the Debian packages above are already present), then
# codelm with its pinned dependencies into the image's Python (the one the Beam harness runs).
RUN make toolchains \
 && pip install --no-cache-dir -e .
# The toolchain caches each language builds on the host on first use (the C++ precompiled header, the
# Java and C# drivers and runtimes, the Rust harness library), built once here rather than on every
# worker. (No sandbox runs during `docker build`: it has no namespaces to give.)
RUN python -c "from sandbox.renderers import warm_caches; warm_caches()"

ENTRYPOINT ["/opt/apache/beam/boot"]
