// Package docker runs a job's steps in a container of the job's image on a Docker Engine,
// beside the job's service containers on a network of the job's own, and sweeps away what
// a dead worker left behind. It talks to the Engine API only; it must not shell out to the
// docker CLI, and it must not know about HTTP or the store.
package docker
