//go:build unix

package config

import "syscall"

// PrivateFiles makes every file and directory this process creates
// private to its user (umask 077). DW_HOME holds the store, the receipt
// key, the demo warehouse and logs; no other user on the machine should
// read them, whatever umask the process was started with. Every binary
// calls it first thing (cmd/dw's main, deps.Load for the agents).
func PrivateFiles() { syscall.Umask(0o077) }
