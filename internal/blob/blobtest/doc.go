// Package blobtest holds the contract every blob.Store must meet, as one suite each driver's
// tests run, and a throwaway MinIO server for the S3 driver's tests.
//
// It must not be imported by non-test code.
package blobtest
