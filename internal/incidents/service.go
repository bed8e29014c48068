package incidents

import (
	"context"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Service holds what the dw-incidents tools need. Each tool is one method
// with a JSON-friendly params struct and result. Methods are safe for
// concurrent use: all state is in the store.
type Service struct {
	// DB is the shared store.
	DB *store.DB
	// Clock tells the time; clock.System when nil.
	Clock clock.Clock
	// Graph is the context graph. Without it, symptoms join incidents only
	// on the same asset and diagnosis knows only same-asset relations.
	Graph Graph
	// OpenWarehouse returns the configured warehouse of that name, for
	// metrics defined by SQL (deps.Deps.Warehouse fits). The warehouse
	// stays owned by the caller: incidents never closes it.
	OpenWarehouse func(ctx context.Context, name string) (warehouse.Warehouse, error)
	// Settings tune joining and scoring; zero fields take the defaults.
	Settings Settings
}

// Settings tune how symptoms are grouped and metrics are scored.
type Settings struct {
	// JoinWindow is how far apart in time two symptoms may start and still
	// be one incident. Default 6h.
	JoinWindow time.Duration
	// JoinHops is how far apart in the graph two symptomatic assets may be
	// and still be one incident. Default 3.
	JoinHops int
	// MetricHistory is how much of a metric's past a point is scored
	// against. Default 28 days (four of each hour of the week).
	MetricHistory time.Duration
	// HistoryHops is how far up- and downstream History looks for
	// incidents on the same feed. Default 4.
	HistoryHops int
}

func (s Settings) withDefaults() Settings {
	if s.JoinWindow <= 0 {
		s.JoinWindow = 6 * time.Hour
	}
	if s.JoinHops <= 0 {
		s.JoinHops = 3
	}
	if s.MetricHistory <= 0 {
		s.MetricHistory = 28 * 24 * time.Hour
	}
	if s.HistoryHops <= 0 {
		s.HistoryHops = 4
	}
	return s
}

func (s *Service) now() time.Time {
	if s.Clock == nil {
		return time.Now().UTC()
	}
	return s.Clock.Now().UTC()
}

func (s *Service) settings() Settings { return s.Settings.withDefaults() }
