// Package clients gives agents the clients to the external systems dw.yaml
// configures (Kafka, Schema Registry, Kafka Connect, Flink, orchestrators),
// built on the first call that needs one and held in the agent's deps for
// its life, safe for concurrent use. A client that could not be built is
// not kept, so a system that comes up later is picked up by the next call.
//
// It is a package apart from deps so that an agent that talks to none of
// these systems does not link their client libraries (franz-go alone is a
// large part of dw-connectors).
package clients

import (
	"context"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/flink"
	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/registry"
)

// Kafka connects to the configured cluster. Building the client checks
// that a broker answers within the dial timeout (kafka.timeout in dw.yaml),
// so an unreachable cluster fails fast with the brokers and the timeout
// named; ctx bounds that check.
func Kafka(ctx context.Context, d *deps.Deps) (*kafka.Client, error) {
	kc := d.Config.Kafka
	if kc == nil || len(kc.Brokers) == 0 {
		return nil, fmt.Errorf("no kafka configured: set kafka.brokers in dw.yaml (and kafka.name, the cluster name used in asset ids such as kafka://prod/<topic>)")
	}
	return deps.Cached(d, "kafka", func() (*kafka.Client, error) {
		cfg := kafka.Config{Brokers: kc.Brokers, TLS: kc.TLS, DialTimeout: kc.Timeout}
		if kc.SASL != nil {
			user, err := config.Secret(kc.SASL.UsernameEnv, "kafka.sasl.username_env")
			if err != nil {
				return nil, err
			}
			pass, err := config.Secret(kc.SASL.PasswordEnv, "kafka.sasl.password_env")
			if err != nil {
				return nil, err
			}
			cfg.SASL = &kafka.SASL{Mechanism: kc.SASL.Mechanism, Username: user, Password: pass}
		}
		return kafka.NewClient(ctx, cfg)
	})
}

// RegistryConfigured reports whether dw.yaml names a Schema Registry.
func RegistryConfigured(d *deps.Deps) bool {
	sc := d.Config.SchemaRegistry
	return sc != nil && strings.TrimSpace(sc.URL) != ""
}

// Registry is the Schema Registry client; credentials come from the
// environment variables dw.yaml names.
func Registry(d *deps.Deps) (*registry.Client, error) {
	if !RegistryConfigured(d) {
		return nil, fmt.Errorf("no schema registry configured: set schema_registry.url in dw.yaml (e.g. http://localhost:8081)")
	}
	sc := d.Config.SchemaRegistry
	return deps.Cached(d, "schema_registry", func() (*registry.Client, error) {
		cfg := registry.Config{URL: sc.URL, Timeout: sc.Timeout}
		if sc.UsernameEnv != "" {
			u, err := config.Secret(sc.UsernameEnv, "schema_registry.username_env")
			if err != nil {
				return nil, err
			}
			cfg.Username = u
		}
		if sc.PasswordEnv != "" {
			p, err := config.Secret(sc.PasswordEnv, "schema_registry.password_env")
			if err != nil {
				return nil, err
			}
			cfg.Password = p
		}
		c, err := registry.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("schema_registry in dw.yaml: %w", err)
		}
		return c, nil
	})
}

// Connect is the Kafka Connect client.
func Connect(d *deps.Deps) (*connect.Client, error) {
	cc := d.Config.KafkaConnect
	if cc == nil || strings.TrimSpace(cc.URL) == "" {
		return nil, fmt.Errorf("no kafka connect configured: set kafka_connect.url in dw.yaml (any worker, e.g. http://connect:8083)")
	}
	return deps.Cached(d, "kafka_connect", func() (*connect.Client, error) {
		c, err := connect.NewClient(cc.URL, cc.Timeout)
		if err != nil {
			return nil, fmt.Errorf("kafka_connect.url in dw.yaml: %w", err)
		}
		return c, nil
	})
}

// Flink is the Flink JobManager client.
func Flink(d *deps.Deps) (*flink.Client, error) {
	fc := d.Config.Flink
	if fc == nil || strings.TrimSpace(fc.URL) == "" {
		return nil, fmt.Errorf("no flink configured: set flink.url in dw.yaml (the JobManager REST address, e.g. http://jobmanager:8081)")
	}
	return deps.Cached(d, "flink", func() (*flink.Client, error) {
		c, err := flink.NewClient(fc.URL, fc.Timeout)
		if err != nil {
			return nil, fmt.Errorf("flink.url in dw.yaml: %w", err)
		}
		return c, nil
	})
}

// Runners are the configured orchestrators' runners. They read their
// credentials per call, so holding them holds no secret.
func Runners(d *deps.Deps) (orchestrate.Runners, error) {
	return deps.Cached(d, "orchestrators", func() (orchestrate.Runners, error) {
		rs, err := orchestrate.NewRunners(d.Config.Orchestrators)
		if err != nil {
			return nil, fmt.Errorf("orchestrators in dw.yaml: %w", err)
		}
		return rs, nil
	})
}
