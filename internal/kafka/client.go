// Package kafka reads the state of a Kafka cluster that data workers need to
// judge a stream: consumer lag per group, topic and partition (with a status
// judged over a window of samples rather than one reading) and topic health
// (replication, leadership, in-sync replicas and the configs that decide
// durability and retention).
//
// Every read is one batched round of admin requests whose count does not
// grow with the number of partitions: lag for hundreds of groups over
// thousands of partitions costs the same handful of requests as lag for one.
package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The SASL mechanisms a Config may name.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

var mechanisms = []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512}

// Defaults applied by SetDefaults.
const (
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 30 * time.Second
)

// SASL holds resolved credentials. The configuration layer reads them from
// the environment variables dw.yaml names; this package never sees the names.
type SASL struct {
	Mechanism string `json:"mechanism" yaml:"mechanism"`
	Username  string `json:"username" yaml:"username"`
	Password  string `json:"-" yaml:"password"`
}

// Config says how to reach one cluster.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string `json:"brokers" yaml:"brokers"`
	// SASL, when set, authenticates every connection.
	SASL *SASL `json:"sasl,omitempty" yaml:"sasl"`
	// TLS encrypts connections, verifying brokers against the system roots.
	TLS bool `json:"tls,omitempty" yaml:"tls"`
	// DialTimeout bounds one connection attempt and the reachability check
	// made when the client is built, so a wrong address fails fast.
	DialTimeout time.Duration `json:"dial_timeout,omitempty" yaml:"dial_timeout"`
	// RequestTimeout bounds one whole read (a lag round, a health check)
	// when the caller's context has no earlier deadline.
	RequestTimeout time.Duration `json:"request_timeout,omitempty" yaml:"request_timeout"`
}

// SetDefaults fills unset durations.
func (c *Config) SetDefaults() {
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
}

// Validate reports the first thing wrong with the config, saying what is
// valid instead.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafka: no brokers configured; list at least one host:port under brokers")
	}
	for i, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			return fmt.Errorf("kafka: broker %d is empty; each broker is host:port", i+1)
		}
	}
	if c.SASL != nil {
		ok := false
		for _, m := range mechanisms {
			if strings.EqualFold(c.SASL.Mechanism, m) {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("kafka: SASL mechanism %q is not supported; use one of %s", c.SASL.Mechanism, strings.Join(mechanisms, ", "))
		}
		if c.SASL.Username == "" || c.SASL.Password == "" {
			return fmt.Errorf("kafka: SASL %s needs both a username and a password", strings.ToUpper(c.SASL.Mechanism))
		}
	}
	if c.DialTimeout < 0 || c.RequestTimeout < 0 {
		return errors.New("kafka: timeouts must not be negative")
	}
	return nil
}

func (c Config) mechanism() sasl.Mechanism {
	switch strings.ToUpper(c.SASL.Mechanism) {
	case MechanismScramSHA256:
		return scram.Auth{User: c.SASL.Username, Pass: c.SASL.Password}.AsSha256Mechanism()
	case MechanismScramSHA512:
		return scram.Auth{User: c.SASL.Username, Pass: c.SASL.Password}.AsSha512Mechanism()
	default:
		return plain.Auth{User: c.SASL.Username, Pass: c.SASL.Password}.AsMechanism()
	}
}

// Client reads one cluster. It is safe for concurrent use.
type Client struct {
	cfg Config
	kgo *kgo.Client
	adm *kadm.Client
}

// NewClient connects to the cluster and checks that a broker answers within
// the dial timeout, so a wrong address or credential is reported at once
// rather than on the first tool call.
func NewClient(ctx context.Context, cfg Config) (*Client, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DialTimeout(cfg.DialTimeout),
		kgo.RetryTimeout(cfg.RequestTimeout),
		kgo.ClientID("data-workers"),
	}
	if cfg.TLS {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	if cfg.SASL != nil {
		opts = append(opts, kgo.SASL(cfg.mechanism()))
	}
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: build client for %s: %w", strings.Join(cfg.Brokers, ", "), err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if err := kc.Ping(pctx); err != nil {
		kc.Close()
		return nil, reachError(cfg, err)
	}
	return &Client{cfg: cfg, kgo: kc, adm: kadm.NewClient(kc)}, nil
}

// reachError explains why no broker answered in words that point at the fix.
func reachError(cfg Config, err error) error {
	brokers := strings.Join(cfg.Brokers, ", ")
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("kafka: brokers %s refused %s credentials for user %q: %w", brokers, strings.ToUpper(cfg.SASL.Mechanism), cfg.SASL.Username, err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism) || errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("kafka: brokers %s do not accept SASL %s: %w", brokers, strings.ToUpper(cfg.SASL.Mechanism), err)
	}
	hint := "check the brokers list, the network path and whether the cluster is up"
	if cfg.TLS {
		hint += "; tls is on, so the brokers must serve TLS with a certificate the system trusts"
	}
	if cfg.SASL != nil {
		// Some brokers drop the connection on a failed login instead of
		// answering with an error code, which looks like this.
		hint += fmt.Sprintf("; SASL %s is on for user %q, and rejected credentials also end this way", strings.ToUpper(cfg.SASL.Mechanism), cfg.SASL.Username)
	}
	return fmt.Errorf("kafka: no broker answered at %s within %s (dial timeout): %w; %s", brokers, cfg.DialTimeout, err, hint)
}

// Brokers are the seed brokers this client was built with.
func (c *Client) Brokers() []string { return append([]string(nil), c.cfg.Brokers...) }

// Close releases the connections.
func (c *Client) Close() { c.kgo.Close() }

// bound applies the request timeout unless the caller's deadline is earlier.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < c.cfg.RequestTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.RequestTimeout)
}

// wrap names the cluster and the bound in errors from a read.
func (c *Client) wrap(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("kafka: %s at %s did not finish within %s: %w", what, strings.Join(c.cfg.Brokers, ", "), c.cfg.RequestTimeout, err)
	}
	return fmt.Errorf("kafka: %s at %s: %w", what, strings.Join(c.cfg.Brokers, ", "), err)
}
