// Package registrytest gives tests an in-memory Confluent Schema Registry
// over HTTP: the demo's in-process registry (internal/demo/schemaregistry),
// closed when the test ends, with seeding errors failing the test. It is
// for tests only; no production binary links it.
package registrytest

import (
	"fmt"
	"testing"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/demo/schemaregistry"
)

// Seeded is one schema to seed.
type Seeded = schemaregistry.Seeded

// Reference is a schema reference in a request or response.
type Reference = schemaregistry.Reference

// Server is the in-memory registry. It is safe for concurrent use.
type Server struct {
	*schemaregistry.Server
	tb testing.TB
}

// New starts a registry with global level BACKWARD. With a non-nil tb it is
// closed when the test ends and seeding errors fail the test.
func New(tb testing.TB) *Server {
	s, err := schemaregistry.Start()
	if err != nil {
		if tb != nil {
			tb.Fatal(err)
		}
		panic(err)
	}
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return &Server{Server: s, tb: tb}
}

// NewServer starts a registry outside a test; the caller closes it.
func NewServer() *Server { return New(nil) }

// Seed registers AVRO schemas as consecutive versions of subject, oldest
// first, without compatibility checks (history is whatever it was), and sets
// the subject's level unless level is empty. A schema that does not parse
// fails the test, or panics outside one: seeds are the caller's own text.
func (s *Server) Seed(subject string, level compat.Level, schemas ...string) {
	seeds := make([]Seeded, len(schemas))
	for i, text := range schemas {
		seeds[i] = Seeded{Schema: text}
	}
	if _, err := s.SeedVersions(subject, level, seeds...); err != nil {
		if s.tb != nil {
			s.tb.Helper()
			s.tb.Fatalf("registrytest: %v", err)
		}
		panic(fmt.Sprintf("registrytest: %v", err))
	}
}
