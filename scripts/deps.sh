#!/usr/bin/env bash
# Installs every tool Gantry's tests use that a fresh Debian machine lacks, or, with
# --check, lists what is missing and exits 1. `make deps` runs it; `.ci/run` runs it
# through `make deps`; `make test` runs the check first, so a missing tool stops the
# suite with one clear message instead of a scattering of failures (no test skips).
set -euo pipefail

# The MinIO server the S3 blob store's tests start (internal/blob/blobtest). MinIO's
# release tags are not Go module versions, so the pin is the module's pseudo-version
# for release commit 7aac2a2 (2026-02-12). A cold build takes several minutes.
MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c

check=false
if [[ "${1:-}" == --check ]]; then
	check=true
fi

export PATH="/usr/local/go/bin:$PATH"
if ! command -v go >/dev/null 2>&1; then
	echo "deps: go not found (looked on PATH and in /usr/local/go/bin); install Go 1.26" >&2
	exit 1
fi
gobin="$(go env GOPATH)/bin"
export PATH="$gobin:$PATH"

# Debian packages, each with the command that shows it is there (installed some other
# way still counts):
#   make, git: the build; gcc, libc6-dev: cgo for `go test -race`; git-lfs: the LFS
#   checkout test (internal/source);
#   postgresql: initdb and pg_ctl for the PostgreSQL store tests (internal/testdb);
#   bubblewrap: the sandbox executor; chromium: the dashboard's browser tests;
#   iproute2: `ip netns` for the network-partition test; util-linux: mount, for the
#   disk-full test's tmpfs; busybox-static: the FROM-scratch images the docker
#   executor's tests build (internal/executor/docker/dockertest); nodejs: JavaScript
#   actions (internal/agent's actions tests run node as a worker does).
missing=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg -s "$1" >/dev/null 2>&1; }
# A dynamically linked busybox (Debian's busybox package) cannot run in an empty image.
file_is_static() { ! grep -q 'ld-linux' <(head -c 4096 "$1" | tr -d '\0' 2>/dev/null); }
have_cmd make || missing+=(make)
have_cmd git || missing+=(git)
have_cmd git-lfs || missing+=(git-lfs)
have_cmd gcc || missing+=(gcc)
have_pkg libc6-dev || [[ -e /usr/include/stdio.h ]] || missing+=(libc6-dev)
if ! have_cmd initdb && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
	missing+=(postgresql)
fi
have_cmd bwrap || missing+=(bubblewrap)
have_cmd node || missing+=(nodejs)
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
have_cmd ip || missing+=(iproute2)
have_cmd mount || missing+=(util-linux)
[[ -x /bin/busybox ]] && file_is_static /bin/busybox || missing+=(busybox-static)

minio_ok=false
if [[ -n "${GANTRY_MINIO:-}" ]]; then
	minio_ok=true # the tests use the server it names
elif have_cmd minio && go version -m "$(command -v minio)" 2>/dev/null |
	grep -q "mod[[:space:]]*$MINIO_MODULE[[:space:]]*$MINIO_VERSION"; then
	minio_ok=true
fi

if $check; then
	problems=("${missing[@]}")
	$minio_ok || problems+=("minio ($MINIO_MODULE@$MINIO_VERSION)")
	if ((${#problems[@]} > 0)); then
		echo "deps: missing: ${problems[*]}" >&2
		echo "deps: run 'make deps' (it installs them; root or sudo needed for apt-get)" >&2
		exit 1
	fi
	exit 0
fi

if ((${#missing[@]} > 0)); then
	echo "deps: installing ${missing[*]}"
	sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		sudo=(sudo -n)
	fi
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update </dev/null
	"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" </dev/null
else
	echo "deps: Debian packages already installed"
fi

if $minio_ok; then
	echo "deps: minio $MINIO_VERSION already installed"
else
	echo "deps: installing minio $MINIO_VERSION into $gobin (a cold build takes minutes)"
	go install "$MINIO_MODULE@$MINIO_VERSION" </dev/null
fi
