package approvals

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
)

// The key that authenticates receipts, proposals, decisions and the
// elicitation request state lives outside the store, so write access to
// the store alone cannot forge or re-seal a record. It comes from, in order:
//
//	DW_RECEIPT_KEY       the key itself (hex or base64, at least 32 bytes)
//	DW_RECEIPT_KEY_FILE  a file holding it, readable by its owner only
//	$DW_HOME/receipt.key created 0600 on first use
//
// A team sharing a PostgreSQL store gives every agent host the same key
// through the first two; each host would otherwise make its own.
const (
	keyEnv      = "DW_RECEIPT_KEY"
	keyFileEnv  = "DW_RECEIPT_KEY_FILE"
	keyFileName = "receipt.key"
)

// keyset holds the purpose-bound keys derived from the master key, so a
// MAC made for one purpose never verifies as another.
type keyset struct {
	receipt []byte
	record  []byte
	state   []byte
	// source says where the key came from, for messages.
	source string
	// anchor is this machine's anchor file of org heads (anchor.go).
	anchor string
}

func derive(master []byte, purpose string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("data-workers " + purpose + " v1"))
	return m.Sum(nil)
}

func newKeyset(master []byte, source string) *keyset {
	return &keyset{receipt: derive(master, "receipt"), record: derive(master, "record"), state: derive(master, "request state"), source: source}
}

// mac is hex HMAC-SHA256 of msg under key.
func mac(key []byte, msg []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return hex.EncodeToString(m.Sum(nil))
}

// macEqual compares two hex MACs in constant time.
func macEqual(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }

var keyCache = struct {
	sync.Mutex
	bySource map[string]*keyset
	// homes maps each store a Service was built for to its config's data
	// directory, so package-level calls (AppendReceipt, Verify) on that
	// store use the same key as the Service.
	homes map[*store.DB]string
}{bySource: map[string]*keyset{}, homes: map[*store.DB]string{}}

// registerHome remembers the data directory whose key a store uses.
func registerHome(db *store.DB, home string) {
	if db == nil {
		return
	}
	keyCache.Lock()
	keyCache.homes[db] = home
	keyCache.Unlock()
}

// keysForQuerier resolves the keys for a store handle: the home a Service
// registered for it, else $DW_HOME, else the default data directory.
func keysForQuerier(q store.Querier) (*keyset, error) {
	home := ""
	if db, ok := q.(*store.DB); ok {
		keyCache.Lock()
		home = keyCache.homes[db]
		keyCache.Unlock()
	}
	if home == "" {
		home = os.Getenv("DW_HOME")
	}
	if home == "" {
		cfg, err := config.Default()
		if err != nil {
			return nil, fmt.Errorf("receipt key: no data directory: %w", err)
		}
		home = cfg.Home
	}
	return loadKeys(home)
}

// loadKeys reads the key from the environment or the home's key file,
// creating the file on first use.
func loadKeys(home string) (*keyset, error) {
	if v := strings.TrimSpace(os.Getenv(keyEnv)); v != "" {
		master, err := decodeKey(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyEnv, err)
		}
		ks := newKeyset(master, keyEnv)
		ks.anchor = anchorPathFor("", home)
		return ks, nil
	}
	path := os.Getenv(keyFileEnv)
	create := false
	if path == "" {
		if home == "" {
			return nil, errors.New("receipt key: no data directory: set DW_HOME, DW_RECEIPT_KEY or DW_RECEIPT_KEY_FILE")
		}
		path, create = filepath.Join(home, keyFileName), true
	}
	keyCache.Lock()
	defer keyCache.Unlock()
	if ks, ok := keyCache.bySource[path]; ok {
		return ks, nil
	}
	master, err := readKeyFile(path, create)
	if err != nil {
		return nil, err
	}
	ks := newKeyset(master, path)
	ks.anchor = anchorPathFor(path, "")
	keyCache.bySource[path] = ks
	return ks, nil
}

func decodeKey(v string) ([]byte, error) {
	b, err := hex.DecodeString(v)
	if err != nil {
		if b, err = base64.StdEncoding.DecodeString(v); err != nil {
			if b, err = base64.RawURLEncoding.DecodeString(v); err != nil {
				return nil, errors.New("the key is neither hex nor base64; make one with: openssl rand -hex 32")
			}
		}
	}
	if len(b) < 32 {
		return nil, fmt.Errorf("the key is %d bytes; at least 32 are required (openssl rand -hex 32)", len(b))
	}
	return b, nil
}

// readKeyFile reads a key file, refusing one others may read, and creates
// it (0600, in a 0700 directory) when create is set and it is missing.
// Two processes creating it at once both end up with the winner's key:
// the file is written aside and linked into place, which fails if taken.
func readKeyFile(path string, create bool) ([]byte, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := writeKeyFile(path); err != nil {
			return nil, err
		}
		fi, err = os.Stat(path)
	}
	if err != nil {
		return nil, fmt.Errorf("receipt key %s: %w", path, err)
	}
	// Checked before reading: a device or a pipe named here would block
	// or never end.
	if !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return nil, fmt.Errorf("receipt key %s is not a regular file of at most 4096 bytes; it must hold the key as hex (openssl rand -hex 32 > file; chmod 600 file)", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("receipt key %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("receipt key %s is readable by other users (mode %04o): anyone who reads it can forge approvals; run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	master, err := decodeKey(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("receipt key %s: %w", path, err)
	}
	return master, nil
}

func writeKeyFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("receipt key: create %s: %w", dir, err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".receipt.key.*")
	if err != nil {
		return fmt.Errorf("receipt key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(hex.EncodeToString(raw[:]) + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("receipt key: %w", err)
	}
	return nil
}
