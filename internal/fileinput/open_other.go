//go:build !unix

package fileinput

import "os"

func openNonBlocking(path string) (*os.File, error) { return os.Open(path) }
