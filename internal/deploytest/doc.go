// Package deploytest holds the test that deploys Gantry from deploy/kubernetes to the
// real cluster scripts/k8s.sh starts, as docs/kubernetes.md tells a user to, and runs a
// pipeline on it. It has no code of its own and must not be imported.
package deploytest
