package store

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// RedisTLS says how the store reaches Redis over TLS (redis.tls): for a
// single server, every node of a Cluster, and the Sentinels and the master
// they name. The zero value is no TLS.
type RedisTLS struct {
	Enabled bool
	// CAFile holds the PEM certificates that Redis's certificate must chain
	// to; "" means the system's roots.
	CAFile string
	// CertFile and KeyFile are this node's client certificate and key (PEM),
	// for Redis's tls-auth-clients (mutual TLS); both or neither.
	CertFile, KeyFile string
	// ServerName is the name Redis's certificate must hold; "" means the
	// host of each address dialled.
	ServerName string
	// InsecureSkipVerify accepts any certificate (tests only): the traffic is
	// encrypted, but to whoever answers.
	InsecureSkipVerify bool
}

// Config reads the files and returns the TLS configuration, nil when TLS
// is off.
func (t RedisTLS) Config() (*tls.Config, error) {
	if !t.Enabled {
		if t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify {
			return nil, errors.New("redis.tls: files or options set without redis.tls.enabled")
		}
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} // documented: tests only
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("redis.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redis.tls.ca_file %s: no PEM certificate", t.CAFile)
		}
		c.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("redis.tls: cert_file and key_file go together")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("redis.tls client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
