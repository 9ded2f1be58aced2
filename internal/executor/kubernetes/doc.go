// Package kubernetes runs each job as a pod (the job's image kept alive, its services
// as sidecars, the workspace in an emptyDir), verifies that the pod really starts, and
// runs steps in it through the exec subresource.
// It must not know about HTTP to the coordinator or the store.
package kubernetes
