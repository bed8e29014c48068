package kafka

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// selfSigned is a certificate no system trusts.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestTLS proves the tls setting changes the wire: a TLS client refuses a
// broker whose certificate the system does not trust, and a plaintext
// client cannot talk to a TLS broker at all.
func TestTLS(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	ctx := context.Background()
	_, err = NewClient(ctx, Config{Brokers: kf.ListenAddrs(), TLS: true, DialTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "certificate") || !strings.Contains(err.Error(), "tls is on") {
		t.Fatalf("untrusted certificate: %v", err)
	}
	start := time.Now()
	_, err = NewClient(ctx, Config{Brokers: kf.ListenAddrs(), DialTimeout: time.Second})
	if err == nil || time.Since(start) > 4*time.Second {
		t.Fatalf("plaintext to a TLS broker: %v after %s", err, time.Since(start))
	}
}
