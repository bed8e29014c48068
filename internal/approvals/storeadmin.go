package approvals

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// EntryStoreAdmin records the store's trust root in the org receipt: the
// OS account (uid and login) that may put a domain's approvers on record
// by an explicit act (dw approvers pin). See governors.go.
const EntryStoreAdmin = "store_admin"

// StoreAdmin is the OS account that administers a store's governance.
type StoreAdmin struct {
	UID    string `json:"uid,omitempty" jsonschema:"numeric uid of the account"`
	OSUser string `json:"os_user,omitempty" jsonschema:"login of the account, looked up by uid"`
	// How says where the admin comes from: the account whose process first
	// sealed the org receipt, the owner of the SQLite file, ...
	How string `json:"how"`
	// Recorded is true when the org receipt records the admin (entry Seq);
	// false when it is derived for a store made before admins were
	// recorded, and recorded with the admin's first act.
	Recorded bool  `json:"recorded"`
	Seq      int64 `json:"seq,omitempty"`
}

func (a StoreAdmin) String() string {
	switch {
	case a.OSUser != "" && a.UID != "":
		return fmt.Sprintf("OS user %s (uid %s)", a.OSUser, a.UID)
	case a.OSUser != "":
		return "OS user " + a.OSUser
	case a.UID == "":
		return "no admin (" + a.How + ")"
	}
	return "uid " + a.UID
}

// is reports whether the person at the terminal is the admin: the same
// login, and the same uid whenever the channel vouched for one.
func (a StoreAdmin) is(by Decider) bool {
	if by.Channel != ChannelTerminal || by.OSUser == "" {
		return false
	}
	if a.OSUser != "" && a.OSUser != by.OSUser {
		return false
	}
	uid := by.Evidence["uid"]
	if a.UID != "" && uid != "" && uid != a.UID {
		return false
	}
	return a.OSUser != "" || (a.UID != "" && uid == a.UID)
}

// lookupUID resolves a uid to its account; tests replace it.
var lookupUID = user.LookupId

// accountOf is the admin record for a uid, its login looked up by uid
// (never from the environment).
func accountOf(uid int, how string) StoreAdmin {
	a := StoreAdmin{UID: strconv.Itoa(uid), How: how}
	if u, err := lookupUID(a.UID); err == nil && u != nil {
		a.OSUser = u.Username
	}
	return a
}

// fileOwner is the uid owning path.
func fileOwner(path string) (int, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, errors.New("the file system does not say who owns it")
	}
	return int(st.Uid), nil
}

// foundingAdmin is the admin recorded when the org receipt is first
// sealed: for SQLite the owner of the store file (the account that created
// it, which another local user cannot become), for PostgreSQL the account
// running the process that seals the org receipt's first entry.
func foundingAdmin(ctx context.Context, q store.Querier) StoreAdmin {
	if path, err := sqliteFile(ctx, q); err == nil && path != "" {
		if uid, err := fileOwner(path); err == nil {
			return accountOf(uid, "owner of the SQLite store file "+path)
		}
	}
	return accountOf(processUID(), "the account whose process first sealed the org receipt")
}

// sqliteFile is the file of the store q reads, asked of SQLite itself so
// it works inside a transaction too; "" for PostgreSQL.
func sqliteFile(ctx context.Context, q store.Querier) (string, error) {
	if q.Dialect() != store.SQLite {
		return "", nil
	}
	var path string
	err := q.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path)
	return path, err
}

// recordFoundingAdmin seals the store admin as the org receipt's first
// entry when the org receipt has none yet. appendTx calls it before the
// first org entry of any kind, inside the same transaction.
func recordFoundingAdmin(ctx context.Context, q store.Querier, ks *keyset, at time.Time) error {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM receipt_heads WHERE receipt_id = ?`, OrgReceiptID).Scan(&n); err != nil || n > 0 {
		return err
	}
	return writeAdmin(ctx, q, ks, at, foundingAdmin(ctx, q))
}

func writeAdmin(ctx context.Context, q store.Querier, ks *keyset, at time.Time, a StoreAdmin) error {
	actor := "uid:" + a.UID
	if a.OSUser != "" {
		actor = "os:" + a.OSUser
	}
	// A random store id makes every store's first org entry, which names
	// the store in this machine's anchor (anchor.go) and binds its replay
	// mark, unique: two stores made alike at the same replayed time would
	// otherwise seal the same genesis.
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	body, err := canonicalJSON(map[string]any{"uid": a.UID, "os_user": a.OSUser, "how": a.How, "store_id": hex.EncodeToString(id[:])})
	if err != nil {
		return err
	}
	_, err = appendTx(ctx, q, ks, at, OrgReceiptID, EntryStoreAdmin, actor, body)
	return err
}

// storeAdmin is the store's admin: the one the (verified) org receipt
// records, else, for a store made before admins were recorded, the one
// derived by the migration rule:
//
//   - SQLite: the owner of the store file;
//   - PostgreSQL: the first OS login the org receipt records lifting the
//     stop or changing autonomy at the terminal (acts that needed a
//     recorded approver; a stop, open to anyone, does not count), else the
//     owner of the receipt key file.
//
// The caller checks the org chain first.
func (s *Service) storeAdmin(ctx context.Context, q store.Querier, ks *keyset) (StoreAdmin, error) {
	r, err := scanRawGovEntry(q.QueryRowContext(ctx, `SELECT `+govEntryCols+` FROM receipt_entries
		WHERE receipt_id = ? AND kind = ? ORDER BY seq DESC LIMIT 1`, OrgReceiptID, EntryStoreAdmin))
	switch {
	case err == nil:
		e, problem, err := r.check(ctx, q, ks)
		if err != nil {
			return StoreAdmin{}, err
		}
		if problem != "" {
			return StoreAdmin{}, invalid("the store admin's record is not genuine: %s; %s", problem, tamperedAdvice)
		}
		return StoreAdmin{UID: e.str("uid"), OSUser: e.str("os_user"), How: e.str("how"), Recorded: true, Seq: e.seq}, nil
	case !errors.Is(err, sql.ErrNoRows):
		return StoreAdmin{}, err
	}
	if q.Dialect() == store.SQLite {
		path, err := sqliteFile(ctx, q)
		if err != nil {
			return StoreAdmin{}, fmt.Errorf("store admin: the store's file: %w", err)
		}
		uid, err := fileOwner(path)
		if err != nil {
			return StoreAdmin{}, fmt.Errorf("store admin: owner of %s: %w", path, err)
		}
		return accountOf(uid, "owner of the SQLite store file "+path+" (the store was made before admins were recorded)"), nil
	}
	rows, err := q.QueryContext(ctx, `SELECT `+govEntryCols+` FROM receipt_entries
		WHERE receipt_id = ? AND kind IN (?, ?) ORDER BY seq`, OrgReceiptID, EntryResume, EntryAutonomy)
	if err != nil {
		return StoreAdmin{}, err
	}
	var first *rawGovEntry
	for rows.Next() {
		r, err := scanRawGovEntry(rows)
		if err != nil {
			rows.Close()
			return StoreAdmin{}, err
		}
		var p struct {
			Evidence map[string]string `json:"evidence"`
		}
		if json.Unmarshal([]byte(r.payload), &p) == nil && p.Evidence["os_user"] != "" {
			first = &r
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return StoreAdmin{}, err
	}
	if first != nil {
		e, problem, err := first.check(ctx, q, ks)
		if err != nil {
			return StoreAdmin{}, err
		}
		if problem != "" {
			return StoreAdmin{}, invalid("the first terminal act in the org receipt is not genuine: %s; %s", problem, tamperedAdvice)
		}
		var login, uid string
		if ev, ok := e.payload["evidence"].(map[string]any); ok {
			login, _ = ev["os_user"].(string)
			uid, _ = ev["uid"].(string)
		}
		return StoreAdmin{UID: uid, OSUser: login, How: fmt.Sprintf("first OS login to lift the stop or change autonomy in the org receipt (entry %d; the store was made before admins were recorded)", e.seq)}, nil
	}
	if ks.source != keyEnv && ks.source != "" {
		if uid, err := fileOwner(ks.source); err == nil {
			return accountOf(uid, "owner of the receipt key file "+ks.source+" (the store was made before admins were recorded)"), nil
		}
	}
	return StoreAdmin{}, invalid("this PostgreSQL store records no admin and none can be derived (no resume or autonomy change in the org receipt, and the receipt key comes from %s, which has no owner); "+
		"give dw the key through DW_RECEIPT_KEY_FILE, a 0600 file owned by the account that administers the store, and run dw approvers pin as that account", keyEnv)
}

// StoreAdmin reports the store's admin, and whether the org receipt
// records it or it is derived (see storeAdmin).
func (s *Service) StoreAdmin(ctx context.Context) (StoreAdmin, error) {
	ks, err := s.keys()
	if err != nil {
		return StoreAdmin{}, err
	}
	if p, err := orgChainProblem(ctx, s.db, ks, s.db, false); err != nil || p != "" {
		if p != "" {
			return StoreAdmin{}, invalid("%s; %s", chainFailure(p), tamperedAdvice)
		}
		return StoreAdmin{}, err
	}
	return s.storeAdmin(ctx, s.db, ks)
}
