//go:build !unix

package config

// PrivateFiles is a no-op where there is no umask.
func PrivateFiles() {}
