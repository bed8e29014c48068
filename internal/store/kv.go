package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// GetSetting reads an organisation-wide setting; ok is false when unset.
func GetSetting(ctx context.Context, q Querier, key string) (value string, updated time.Time, ok bool, err error) {
	var ms int64
	err = q.QueryRowContext(ctx, "SELECT value, updated_ms FROM kv WHERE key = ?", key).Scan(&value, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, false, nil
	}
	if err != nil {
		return "", time.Time{}, false, err
	}
	return value, FromMillis(ms), true, nil
}

// PutSetting writes an organisation-wide setting.
func PutSetting(ctx context.Context, q Querier, key, value string, at time.Time) error {
	_, err := q.ExecContext(ctx, `INSERT INTO kv (key, value, updated_ms) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_ms = excluded.updated_ms`,
		key, value, Millis(at))
	return err
}

// SettingOnce writes a setting only if it is unset and returns the stored
// value: the one given, or the one an earlier writer (another process)
// stored first. For values made once and then shared, such as a key.
func SettingOnce(ctx context.Context, q Querier, key, value string, at time.Time) (string, error) {
	if _, err := q.ExecContext(ctx, `INSERT INTO kv (key, value, updated_ms) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING`,
		key, value, Millis(at)); err != nil {
		return "", err
	}
	v, _, ok, err := GetSetting(ctx, q, key)
	if err == nil && !ok {
		err = errors.New("setting " + key + " vanished as it was written")
	}
	return v, err
}

// DeleteSetting removes an organisation-wide setting.
func DeleteSetting(ctx context.Context, q Querier, key string) error {
	_, err := q.ExecContext(ctx, "DELETE FROM kv WHERE key = ?", key)
	return err
}
