#!/bin/bash
# scripts/k8s.sh: a real single-node Kubernetes cluster for Gantry's kubernetes executor
# tests, built only from the Go module proxy and Debian packages (no registry, no
# downloads): etcd from Debian; kube-apiserver, kube-controller-manager, kube-scheduler,
# kubelet (and kubectl when the machine lacks it) v1.34.4 compiled from k8s.io/kubernetes
# through a small wrapper module; a second containerd (Debian's binary, its own config and
# socket, CRI on; Docker's containerd is left alone); Debian's CNI bridge plugin; pause and
# busybox images built FROM scratch and imported with ctr.
#
#   scripts/k8s.sh build        compile the binaries (once: they are reused while their version matches)
#   scripts/k8s.sh up           build when needed, start, wait until the node is Ready; prints the env
#   scripts/k8s.sh down         stop what it started and undo what the kubelet changed
#   scripts/k8s.sh run -- CMD   up, run CMD with GANTRY_TEST_KUBECONFIG and GANTRY_TEST_K8S_CONTAINERD
#                               set, then down whatever CMD did (a trap); exits with CMD's status
#   scripts/k8s.sh env          print the variables the tests read (for a cluster that is up)
#
# Everything listens on 127.0.0.1 except the API server, which also listens on the pod
# bridge's gateway (10.244.0.1) so that a worker running in a pod reaches it; pods sit on a
# bridge (k8sbr0, 10.244.0.0/24) that has no default route, so they cannot send anything
# off the node. There is no kube-proxy: the service range is blackholed on the host, except
# the API server's service address (10.96.0.1:443), which a DNAT rule sends to the API
# server as kube-proxy would.
#
# Why v1.34 and the other settings: docs/development.md ("The Kubernetes cluster").
#
# Env: K8S_DIR (default ~/.cache/gantry-k8s: binaries kept there are reused)
#      K8S_VERSION (default v1.34.4)  K8S_BUILD_P (go build -p, default 3)
#      K8S_NO_BUILD=1: never compile; fail naming what is missing
set -eEuo pipefail

K8S_VERSION=${K8S_VERSION:-v1.34.4}
K8S_MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)
D=${K8S_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gantry-k8s}
SRC=$D/kbin            # wrapper module + bin/
BIN=$SRC/bin
R=$D/run               # runtime state: pki, configs, logs, data
PKI=$R/pki
CTRD_SOCK=/run/k8s-containerd/containerd.sock
POD_CIDR=10.244.0.0/24
SVC_CIDR=10.96.0.0/16
BR=k8sbr0
# The API server listens on the pod bridge's gateway: the host and the pods both reach it there.
API_IP=10.244.0.1
API_DNAT="-i $BR -d 10.96.0.1 -p tcp --dport 443 -j DNAT --to-destination $API_IP:6443"
# Pod to pod: with br_netfilter, bridged packets go through FORWARD, whose policy Docker
# sets to DROP; Kubernetes' network model wants every pod to reach every other.
POD_FORWARD="-i $BR -o $BR -j ACCEPT"
export PATH=$BIN:$PATH

log() { echo "[$(date -u +%T)] k8s: $*" >&2; }

# A failure names the step it happened in, and where its log is.
STEP=start
step() { STEP=$1; log "$1"; }
fail_step() {
  local rc=$?
  echo "k8s.sh: the cluster did not come up: step \"$STEP\" failed (exit $rc)${STEP_LOG:+; its log: $STEP_LOG}" >&2
  if [ -n "${STEP_LOG:-}" ] && [ -f "$STEP_LOG" ]; then tail -n 30 "$STEP_LOG" | sed 's/^/  | /' >&2; fi
  exit $rc
}

# Node name: must resolve to a loopback address, because the API server reaches the
# kubelet by the node's Hostname address (never by the machine's external IP).
node_name() {
  local h; h=$(hostname)
  if getent hosts "$h" | awk '{print $1}' | grep -E '^127\.' >/dev/null; then echo "$h"; else echo localhost; fi
}
NODE=$(node_name)

# ---------------------------------------------------------------- teardown
down() {
  set +e
  log "teardown"
  if [ -f $R/admin.kubeconfig ] && [ -f $R/pids/kube-apiserver ] && kill -0 "$(cat $R/pids/kube-apiserver)" 2>/dev/null; then
    # the kubelet gets 20 s to stop the pods itself (mounts, netns); what is left then is killed below
    timeout 20 kubectl --kubeconfig $R/admin.kubeconfig delete pods --all -A --grace-period=1 --wait=true >/dev/null 2>&1
  fi
  for p in kubelet kube-scheduler kube-controller-manager kube-apiserver; do
    [ -f $R/pids/$p ] && kill "$(cat $R/pids/$p)" 2>/dev/null
  done
  sleep 2
  # remove whatever pod sandboxes/containers are left in our containerd (not Docker's)
  if [ -S $CTRD_SOCK ]; then
    for t in $(ctr -a $CTRD_SOCK -n k8s.io tasks ls -q 2>/dev/null); do ctr -a $CTRD_SOCK -n k8s.io tasks kill -s SIGKILL "$t" 2>/dev/null; done
    sleep 1
    for t in $(ctr -a $CTRD_SOCK -n k8s.io tasks ls -q 2>/dev/null); do ctr -a $CTRD_SOCK -n k8s.io tasks delete -f "$t" 2>/dev/null; done
    for c in $(ctr -a $CTRD_SOCK -n k8s.io containers ls -q 2>/dev/null); do ctr -a $CTRD_SOCK -n k8s.io containers delete "$c" 2>/dev/null; done
  fi
  for p in containerd etcd; do
    [ -f $R/pids/$p ] && kill "$(cat $R/pids/$p)" 2>/dev/null
  done
  sleep 2
  for p in kubelet kube-scheduler kube-controller-manager kube-apiserver containerd etcd; do
    if [ -f $R/pids/$p ]; then kill -0 "$(cat $R/pids/$p)" 2>/dev/null && kill -9 "$(cat $R/pids/$p)" 2>/dev/null; rm -f $R/pids/$p; fi
  done
  # a bind of /run/netns made over pods' namespaces (see up) hides their mounts: drop it
  # first, so that they can be unmounted and deleted below
  if [ -n "$(awk '$5 ~ /^\/run\/netns\/cni-/' /proc/self/mountinfo)" ]; then umount -l /run/netns 2>/dev/null || true; fi
  # mounts left by kubelet (secret/projected tmpfs) and containerd (rootfs, shm, netns)
  grep -E " ($R|/run/k8s-containerd|/var/lib/k8s-containerd|/run/netns/cni-)" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  for n in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do ip netns delete "$n" 2>/dev/null; done
  ip link delete $BR 2>/dev/null
  ip route del blackhole $SVC_CIDR 2>/dev/null
  while iptables -w -t nat -D PREROUTING $API_DNAT 2>/dev/null; do :; done
  while iptables -w -D FORWARD $POD_FORWARD 2>/dev/null; do :; done
  # cgroups the kubelet created (cgroup v1: one tree per controller)
  for c in /sys/fs/cgroup/*/kubepods*; do
    [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  rm -rf /run/k8s-containerd
  [ -f $R/created-var-lib-kubelet ] && rm -rf /var/lib/kubelet && rm -f $R/created-var-lib-kubelet
  # /run/netns is a bind mount made for the pods' netns; drop it only when no netns is left
  if [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ]; then umount /run/netns 2>/dev/null; rmdir /run/netns 2>/dev/null; fi
  # kernel tunables the kubelet changed
  [ -f $R/sysctl.saved ] && while read -r k v; do echo "$v" > /proc/sys/$k; done < $R/sysctl.saved && rm -f $R/sysctl.saved
  # iptables chains the kubelet creates (canary/hint chains; no rules of ours otherwise)
  for ipt in iptables ip6tables iptables-legacy ip6tables-legacy; do
    command -v $ipt >/dev/null || continue
    $ipt -w -t filter -D INPUT -j KUBE-FIREWALL 2>/dev/null; $ipt -w -t filter -D OUTPUT -j KUBE-FIREWALL 2>/dev/null
    for t in mangle nat filter; do
      for ch in KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT KUBE-FIREWALL KUBE-MARK-DROP KUBE-MARK-MASQ KUBE-POSTROUTING; do
        $ipt -w -t $t -F $ch 2>/dev/null && $ipt -w -t $t -X $ch 2>/dev/null
      done
    done
  done
  # empty nft tables the kubelet's iptables probing leaves behind (deleted only when they hold no chain)
  if command -v nft >/dev/null; then
    for t in "ip mangle" "ip6 mangle" "ip6 nat" "ip6 filter"; do
      nft list table $t >/dev/null 2>&1 && [ "$(nft list table $t | grep -c chain)" = 0 ] && nft delete table $t
    done
  fi
  log "teardown done (state left in $R; rm -rf $R /var/lib/k8s-containerd to wipe)"
}
# ---------------------------------------------------------------- 0. packages
packages() {
if ! command -v etcd >/dev/null || [ ! -x /usr/lib/cni/bridge ] || ! command -v busybox >/dev/null || ! command -v containerd >/dev/null || ! command -v runc >/dev/null || ! command -v iptables >/dev/null || ! command -v openssl >/dev/null || ! command -v ctr >/dev/null; then
  step "apt: etcd-server containernetworking-plugins busybox-static containerd runc iptables openssl"
  sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo -n)
  "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
  # policy-rc.d keeps the etcd package from starting its own service (restored afterwards)
  had_policy=0; [ -e /usr/sbin/policy-rc.d ] && { had_policy=1; cp -p /usr/sbin/policy-rc.d /tmp/policy-rc.d.bak; }
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    etcd-server containernetworking-plugins busybox-static containerd runc iptables openssl >/dev/null
  if [ $had_policy = 1 ]; then cp -p /tmp/policy-rc.d.bak /usr/sbin/policy-rc.d; else rm -f /usr/sbin/policy-rc.d; fi
fi
}

# ---------------------------------------------------------------- 1. binaries
need_build() {
  [ ! -x $BIN/kubelet ] || [ ! -x $BIN/kube-apiserver ] || [ ! -x $BIN/kube-controller-manager ] || [ ! -x $BIN/kube-scheduler ] \
   || [ "$($BIN/kube-apiserver --version 2>/dev/null | awk '{print $2}')" != "$K8S_VERSION" ] \
   || ! command -v kubectl >/dev/null
}
build() {
  need_build || return 0
  if [ -n "${K8S_NO_BUILD:-}" ]; then
    echo "k8s.sh: K8S_NO_BUILD is set and $BIN lacks a $K8S_VERSION build (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl)" >&2
    return 1
  fi
  step "build Kubernetes $K8S_VERSION from the Go module proxy (about 1,100 CPU-seconds the first time)"
  STEP_LOG=$D/build.log; mkdir -p $D; : > $STEP_LOG
  local started=$SECONDS
  mkdir -p $SRC && cd $SRC
  GM=$(go mod download -json k8s.io/kubernetes@$K8S_VERSION 2>>$STEP_LOG | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  python3 - "$GM" "$K8S_VERSION" > go.mod <<'EOF'
import sys,re
src=open(sys.argv[1]).read(); v=sys.argv[2]; sv='v0.'+v[3:]
stag=re.findall(r'^\s*(k8s\.io/[\w.-]+) => \./staging', src, flags=re.M)
src=re.sub(r'\nreplace \((.|\n)*?\n\)\n', '\n', src)
src=re.sub(r'^module .*$', 'module kbin', src, flags=re.M)
src+='\nrequire k8s.io/kubernetes '+v+'\n\nreplace (\n'+''.join(f'\t{m} => {m} {sv}\n' for m in stag)+')\n'
print(src)
EOF
  LD="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$K8S_MINOR -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$K8S_MINOR"
  mkdir -p bin
  # kubectl too when the machine has none
  local kubectl=""
  command -v kubectl >/dev/null || kubectl=k8s.io/kubernetes/cmd/kubectl
  # -N -l on k8s.io/... : no optimisation/inlining for Kubernetes' own packages (faster compile on 2 cores)
  GOFLAGS=-mod=mod CGO_ENABLED=0 go build -p ${K8S_BUILD_P:-3} -gcflags="k8s.io/...=-N -l" -ldflags "$LD" -o bin/ \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet $kubectl >>$STEP_LOG 2>&1
  log "built in $((SECONDS - started)) s"
  STEP_LOG=
}


up() {
packages
build
mkdir -p $R/pids $R/logs $PKI $R/etcd $R/kubelet $R/pod-logs $R/cni/net.d $R/cni/ipam

# ---------------------------------------------------------------- 2. PKI
if [ ! -f $PKI/ca.crt ]; then
  step "PKI"
  cd $PKI
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=k8s-ci-ca" 2>/dev/null
  cert() { # name CN O [SANs]
    local n=$1 cn=$2 o=$3 san=${4:-}
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout $n.key -out $n.csr -subj "/CN=$cn${o:+/O=$o}" 2>/dev/null
    { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"
      if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"; else echo "extendedKeyUsage=clientAuth"; fi; } > $n.ext
    openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $n.crt -days 3650 -extfile $n.ext 2>/dev/null
    rm -f $n.csr $n.ext
  }
  cert apiserver kube-apiserver "" "IP:127.0.0.1,IP:$API_IP,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin kubernetes-admin system:masters
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert controller-manager system:kube-controller-manager ""
  cert scheduler system:kube-scheduler ""
  cert kubelet "system:node:$NODE" system:nodes
  openssl ecparam -name prime256v1 -genkey -noout -out sa.key && openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
fi
kcfg() { # name user
  cat > $R/$1.kubeconfig <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://$API_IP:6443", certificate-authority: "$PKI/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$PKI/$1.crt", client-key: "$PKI/$1.key"}
contexts:
- name: local
  context: {cluster: local, user: $2}
current-context: local
EOF
}
kcfg admin kubernetes-admin; kcfg controller-manager system:kube-controller-manager
kcfg scheduler system:kube-scheduler; kcfg kubelet "system:node:$NODE"

running() { # name: its process is alive (a killed one whose parent has not reaped it yet is a zombie, which kill -0 still finds)
  local pid
  pid=$(cat $R/pids/$1 2>/dev/null) || return 1
  kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" | cut -c1)" != Z ]
}
start() { # name cmd...
  local n=$1; shift
  if running $n; then return; fi
  STEP_LOG=$R/logs/$n.log
  setsid "$@" >$R/logs/$n.log 2>&1 < /dev/null &
  echo $! > $R/pids/$n
  log "started $n pid $(cat $R/pids/$n)"
}
wait_for() { # what seconds cmd...
  local what=$1 s=$2; shift 2
  for _ in $(seq 1 "$s"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "timeout waiting for $what" >&2; return 1
}

# ---------------------------------------------------------------- 3. etcd
step etcd
start etcd etcd --name k8s --data-dir $R/etcd \
  --listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
  --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
  --initial-cluster k8s=http://127.0.0.1:23800 --listen-metrics-urls http://127.0.0.1:23810
wait_for etcd 30 curl -fs http://127.0.0.1:23790/health

# ---------------------------------------------------------------- 4. containerd (second instance, CRI)
cat > $R/containerd.toml <<EOF
version = 2
root = "/var/lib/k8s-containerd"
state = "/run/k8s-containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "$CTRD_SOCK.ttrpc"
[debug]
  address = "/run/k8s-containerd/debug.sock"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # this VM denies lowering oom_score_adj (runc: "failed to update /proc/self/oom_score_adj:
  # Permission denied" -> "can't get final child's PID from pipe: EOF"); clamp to containerd's own
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$R/cni/net.d"
    max_conf_num = 1
EOF
cat > $R/cni/net.d/10-k8s-bridge.conflist <<EOF
{
  "cniVersion": "0.4.0",
  "name": "k8s-pod-net",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BR", "isGateway": true, "isDefaultGateway": false,
      "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "$R/cni/ipam", "ranges": [[{"subnet": "$POD_CIDR"}]],
               "routes": [{"dst": "$SVC_CIDR", "gw": "$API_IP"}]}
    }
  ]
}
EOF
step containerd
mkdir -p /run/k8s-containerd
# The pods' network namespaces are mounts on files in /run/netns. `ip netns` (the chaos
# partition test runs it) makes /run/netns a shared bind mount of itself the first time
# it finds it is none; made while pods' namespaces are mounted there, that bind hides
# their mounts, containerd can no longer remove them (unlinkat: EBUSY), and their pods
# never finish terminating. Made here, before the first pod, it is what ip netns wants.
mkdir -p /run/netns
if ! awk '$5 == "/run/netns" && / shared:/ {found = 1} END {exit !found}' /proc/self/mountinfo; then
  mount --bind /run/netns /run/netns
  mount --make-shared /run/netns
fi
start containerd containerd --config $R/containerd.toml
wait_for containerd 30 ctr -a $CTRD_SOCK version
# no kube-proxy: make the service range go nowhere instead of out of the default route,
# except the API server's service address, DNATed to the API server as kube-proxy would:
# the pods' one route (the CNI config's) sends the service range to the bridge's gateway,
# so a worker in a pod finds the API server through its in-cluster configuration.
ip route replace blackhole $SVC_CIDR
iptables -w -t nat -C PREROUTING $API_DNAT 2>/dev/null || iptables -w -t nat -A PREROUTING $API_DNAT
iptables -w -C FORWARD $POD_FORWARD 2>/dev/null || iptables -w -I FORWARD 1 $POD_FORWARD

# ---------------------------------------------------------------- 5. images (built locally, no registry)
build_images() {
  local t=$R/images; mkdir -p $t/pause $t/busybox/rootfs/bin $t/busybox/rootfs/tmp
  cat > $t/pause/main.go <<'EOF'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

// pause: PID 1 of a pod sandbox; reaps children, exits on SIGINT/SIGTERM.
func main() {
	c := make(chan os.Signal, 4)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range c {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
EOF
  printf 'module pause\n\ngo 1.22\n' > $t/pause/go.mod
  (cd $t/pause && CGO_ENABLED=0 go build -ldflags '-s -w' -o pause .)
  printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' > $t/pause/Dockerfile
  cp /bin/busybox $t/busybox/rootfs/bin/busybox
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox $t/busybox/rootfs/bin/$a; done
  printf 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin\nCMD ["/bin/sh"]\n' > $t/busybox/Dockerfile
  DOCKER_BUILDKIT=0 docker build -q -t registry.k8s.io/pause:3.10 $t/pause >/dev/null
  DOCKER_BUILDKIT=0 docker build -q -t local.test/busybox:1.35 $t/busybox >/dev/null
  docker save registry.k8s.io/pause:3.10 local.test/busybox:1.35 -o $t/images.tar
}
if ! ctr -a $CTRD_SOCK -n k8s.io images ls -q | grep '^local.test/busybox:1.35$' >/dev/null; then
  step "images: pause + busybox"
  [ -f $R/images/images.tar ] || build_images
  ctr -a $CTRD_SOCK -n k8s.io images import $R/images/images.tar >/dev/null
fi

# ---------------------------------------------------------------- 6. control plane
step "pod bridge $BR ($API_IP)"
ip link show $BR >/dev/null 2>&1 || ip link add $BR type bridge
# grep reads all of ip's output (no -q): with pipefail, an ip killed by SIGPIPE when
# grep stopped early would make an address that is there look missing.
ip addr show dev $BR | grep "inet $API_IP/" >/dev/null || ip addr add $API_IP/24 dev $BR
ip link set $BR up
step kube-apiserver
start kube-apiserver kube-apiserver \
  --etcd-servers=http://127.0.0.1:23790 \
  --bind-address=$API_IP --advertise-address=$API_IP --secure-port=6443 \
  --service-cluster-ip-range=$SVC_CIDR \
  --client-ca-file=$PKI/ca.crt \
  --tls-cert-file=$PKI/apiserver.crt --tls-private-key-file=$PKI/apiserver.key \
  --kubelet-client-certificate=$PKI/apiserver-kubelet-client.crt --kubelet-client-key=$PKI/apiserver-kubelet-client.key \
  --kubelet-preferred-address-types=Hostname \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file=$PKI/sa.pub --service-account-signing-key-file=$PKI/sa.key \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --allow-privileged=true --profiling=false
wait_for kube-apiserver 120 kubectl --kubeconfig $R/admin.kubeconfig get --raw /readyz
step "kube-controller-manager, kube-scheduler"
start kube-controller-manager kube-controller-manager \
  --kubeconfig=$R/controller-manager.kubeconfig \
  --authentication-kubeconfig=$R/controller-manager.kubeconfig --authorization-kubeconfig=$R/controller-manager.kubeconfig \
  --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
  --service-account-private-key-file=$PKI/sa.key --root-ca-file=$PKI/ca.crt \
  --cluster-signing-cert-file=$PKI/ca.crt --cluster-signing-key-file=$PKI/ca.key
start kube-scheduler kube-scheduler \
  --kubeconfig=$R/scheduler.kubeconfig \
  --authentication-kubeconfig=$R/scheduler.kubeconfig --authorization-kubeconfig=$R/scheduler.kubeconfig \
  --bind-address=127.0.0.1 --leader-elect=false

# ---------------------------------------------------------------- 7. kubelet
cat > $R/kubelet.yaml <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: "unix://$CTRD_SOCK"
cgroupDriver: cgroupfs
failSwapOn: false
podLogsDir: "$R/pod-logs"
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
oomScoreAdj: 0
EOF
# the kubelet sets a few kernel tunables (protectKernelDefaults=false); keep the old values to restore on down
[ -f $R/sysctl.saved ] || for k in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
  echo "$k $(cat /proc/sys/$k)"; done > $R/sysctl.saved
# the kubelet always creates /var/lib/kubelet/device-plugins (hard-coded path): remove it on down if it is ours
[ -e /var/lib/kubelet ] || touch $R/created-var-lib-kubelet
step kubelet
start kubelet kubelet --config=$R/kubelet.yaml --kubeconfig=$R/kubelet.kubeconfig \
  --hostname-override=$NODE --root-dir=$R/kubelet --cert-dir=$R/kubelet/pki --v=1
wait_for "node $NODE Ready" 180 bash -c "kubectl --kubeconfig $R/admin.kubeconfig get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
wait_for "default serviceaccount" 60 kubectl --kubeconfig $R/admin.kubeconfig -n default get serviceaccount default
STEP_LOG=
log "cluster up in $((SECONDS - UP_STARTED)) s: export KUBECONFIG=$R/admin.kubeconfig   (images: local.test/busybox:1.35, registry.k8s.io/pause:3.10)"
}

env_lines() {
  echo "GANTRY_TEST_KUBECONFIG=$R/admin.kubeconfig"
  echo "GANTRY_TEST_K8S_CONTAINERD=$CTRD_SOCK"
  echo "GANTRY_TEST_K8S_NODE=$NODE"
}

[ "$(id -u)" = 0 ] || { echo "k8s.sh: runs as root (it starts a kubelet and a containerd, and changes the network)" >&2; exit 1; }
case "${1:-up}" in
  build) trap fail_step ERR; build ;;
  up) trap fail_step ERR; UP_STARTED=$SECONDS; up; env_lines ;;
  down) down ;;
  env) env_lines ;;
  run)
    shift; [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || { echo "usage: k8s.sh run -- COMMAND..." >&2; exit 2; }
    # down whatever happens, even when up fails half way
    trap 'rc=$?; down >'"'"$D/down.log"'"' 2>&1; exit $rc' EXIT
    bash "$0" up >/dev/null || exit $?
    for kv in $(env_lines); do export "${kv?}"; done
    set +e
    "$@"
    exit $?
    ;;
  *) echo "usage: k8s.sh build|up|down|env|run -- COMMAND..." >&2; exit 2 ;;
esac
