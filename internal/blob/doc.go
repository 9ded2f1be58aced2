// Package blob stores immutable blobs by their SHA-256 digest, on a local directory or an
// S3-compatible service, and hands out pre-signed URLs so clients move blob bytes without
// passing them through the coordinator.
//
// It knows nothing of jobs, artifacts or who may ask for a URL: callers decide that before
// asking for one. A blob is only ever visible once its bytes matched their digest and size.
package blob
