package docker

import "github.com/gantry-ci/gantry/internal/executor"

// PullsMade is how many pulls d has made.
func PullsMade(d *Docker) int64 { return d.pullsMade.Load() }

// PullWaiters is how many callers wait on a pull of d's.
func PullWaiters(d *Docker) int64 { return d.pullWaiters.Load() }

// RegistryAuth exposes registryAuth.
func RegistryAuth(ref string, auth map[string]executor.RegistryCredential) (named, encoded, user string, err error) {
	return registryAuth(ref, auth)
}
