// Package secret encrypts secret values at rest: envelope encryption with AES-256-GCM,
// each value under its own data key, each data key wrapped by a key-encryption key.
//
// It owns the cryptography and the key files only; it stores nothing and never logs.
package secret
