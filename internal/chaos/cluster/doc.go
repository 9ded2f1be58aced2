// Package cluster owns the multi-host fault suite: Gantry's own image in containers on a
// private Docker network (PostgreSQL, MinIO, coordinator replicas, shell and docker
// workers), a seeded nemesis that kills, pauses and partitions them while a generator
// submits runs, and a checker of the invariants of DESIGN.md §5 that reads the API, the
// database, the Docker Engine and a ledger the steps append to.
//
// It holds tests only and must not be imported. `make chaos-cluster` runs its long form;
// `make test` a short one on a fixed seed. docs/reliability.md says what it proves.
package cluster
