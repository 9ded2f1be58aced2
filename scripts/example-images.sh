#!/usr/bin/env bash
# Builds the images examples/containers.yml runs in, from this machine alone: no registry
# is needed or asked. Each is a root filesystem FROM scratch around the host's static
# busybox (Debian's busybox-static; make deps installs it), imported with docker import,
# with /etc/gantry-image holding the image's name so a job can tell which one it is in.
#
#   scripts/example-images.sh [NAME:TAG ...]    (default: the images of containers.yml)
#
# GANTRY_BUSYBOX names another static busybox; DOCKER_HOST another engine.
set -euo pipefail

busybox=${GANTRY_BUSYBOX:-/bin/busybox}
images=("$@")
if [[ ${#images[@]} -eq 0 ]]; then
	images=(gantry-test/go:1.25 gantry-test/go:1.26 gantry-test/busybox:1)
fi

if ! command -v docker >/dev/null 2>&1; then
	echo "example-images: docker (the CLI) is not installed" >&2
	exit 1
fi
if ! docker info >/dev/null 2>&1; then
	echo "example-images: no Docker Engine answers${DOCKER_HOST:+ at $DOCKER_HOST}; start dockerd" >&2
	exit 1
fi
if [[ ! -x $busybox ]] || ! "$busybox" --list-full >/dev/null 2>&1; then
	echo "example-images: no static busybox at $busybox (apt-get install busybox-static, or set GANTRY_BUSYBOX)" >&2
	exit 1
fi
if file -L "$busybox" 2>/dev/null | grep -q 'dynamically linked'; then
	echo "example-images: $busybox is dynamically linked; an image FROM scratch needs a static one (busybox-static)" >&2
	exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for image in "${images[@]}"; do
	root="$work/root"
	rm -rf "$root"
	mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/root" "$root/home/gantry"
	chmod 1777 "$root/tmp"
	cp "$busybox" "$root/bin/busybox"
	while read -r applet; do
		[[ $applet == bin/busybox ]] && continue
		mkdir -p "$root/$(dirname "$applet")"
		ln -sf /bin/busybox "$root/$applet"
	done < <("$busybox" --list-full)
	# bash for steps that ask for it: busybox's sh knows -o pipefail.
	printf '#!/bin/sh\nexec /bin/sh "$@"\n' >"$root/bin/bash"
	chmod 755 "$root/bin/bash"
	printf '%s\n' "$image" >"$root/etc/gantry-image"
	printf 'root:x:0:0:root:/root:/bin/sh\ngantry:x:1000:1000:gantry:/home/gantry:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\ngantry:x:1000:\nnogroup:x:65534:\n' >"$root/etc/group"
	tar -C "$root" --numeric-owner --owner=0 --group=0 -cf - . |
		docker import \
			--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			--change 'CMD ["sh"]' \
			- "$image" >/dev/null
	echo "built $image"
done
