package presenced

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/presenced/presenced/acl"
	"github.com/presenced/presenced/admin"
	"github.com/presenced/presenced/auth"
	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/listener"
)

// secure applies the security posture: with no authentication method and
// without auth.allow_anonymous, every MQTT listener is held to loopback
// (anyone reaching it could claim any user); it loads the credentials, the
// TLS files and the admin token.
func (b *Broker) secure() error {
	cfg := &b.cfg
	if cfg.Presence.Visibility != configs.VisibilityOpen && !cfg.AuthEnabled() {
		return fmt.Errorf("presence.visibility %s needs an authentication method (auth.password_file, auth.jwt, auth.cert_user_from): without one any client can claim any user", cfg.Presence.Visibility)
	}
	if !cfg.AuthEnabled() && !cfg.Auth.AllowAnonymous {
		var held []string
		for _, addr := range []*string{&cfg.MQTT.Addr, &cfg.MQTT.WSAddr} {
			if *addr != configs.Off && !configs.LoopbackAddr(*addr) {
				held = append(held, *addr)
				*addr = onLoopback(*addr)
			}
		}
		if len(held) > 0 {
			b.log.Warn("no authentication configured: MQTT listens on loopback only; configure auth (see docs/production.md) or set auth.allow_anonymous: true",
				"configured", held, "mqtt", cfg.MQTT.Addr, "ws", cfg.MQTT.WSAddr)
		}
	}
	if cfg.AuthEnabled() {
		j := cfg.Auth.JWT
		a, err := auth.New(auth.Config{
			PasswordFile: cfg.Auth.PasswordFile,
			JWT: auth.JWTConfig{
				HS256SecretFile: j.HS256SecretFile, PublicKeysFile: j.PublicKeysFile,
				UserClaim: j.UserClaim, GroupsClaim: j.GroupsClaim, ObserverClaim: j.ObserverClaim,
				ClientIDClaim: j.ClientIDClaim, ClientIDPrefixClaim: j.ClientIDPrefixClaim,
				Audience: j.Audience, Issuer: j.Issuer, Leeway: leeway(j.Leeway.D()),
				RequireExp: !j.AllowNoExp, MaxLifetime: j.MaxLifetime.D(),
			},
			Observers:       cfg.Presence.Observers,
			ObserverMethods: observerMethods(cfg.Auth.ObserverMethods),
			CertUserFrom:    cfg.Auth.CertUserFrom,
			Passwords: auth.PasswordLimits{
				FailureBurst: cfg.Auth.Passwords.FailureBurst, FailureInterval: cfg.Auth.Passwords.FailureInterval.D(),
				Addresses: cfg.Auth.Passwords.Addresses, Concurrency: cfg.Auth.Passwords.Concurrency,
				QueueWait: cfg.Auth.Passwords.QueueWait.D(), CacheSize: cfg.Auth.Passwords.CacheSize,
			},
		})
		if err != nil {
			return err
		}
		b.creds = a
	}
	if cfg.Auth.ACLFile != "" {
		f, err := acl.Load(cfg.Auth.ACLFile)
		if err != nil {
			return err
		}
		b.acl = f
	}
	if cfg.TLS.CertFile != "" {
		r, err := listener.LoadTLS(listener.TLSFiles{
			CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile,
			ClientCAFile: cfg.TLS.ClientCAFile, RequireClientCert: cfg.TLS.RequireClientCert,
		})
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		b.tls = r
	}
	if cfg.Admin.Token != "" || cfg.Admin.TokenFile != "" {
		t, err := admin.LoadToken(string(cfg.Admin.Token), cfg.Admin.TokenFile)
		if err != nil {
			return err
		}
		b.adminToken = t
	}
	return nil
}

// leeway maps the config's leeway (0 is none) to auth's (0 is the default,
// negative none).
func leeway(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// Reload reads the password file, token keys, ACL file, TLS files, admin
// token file and groups file again (on SIGHUP). What fails to load keeps its old
// value; the errors are joined.
func (b *Broker) Reload() error {
	var errs []error
	if b.creds != nil {
		if err := b.creds.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("auth: %w", err))
		} else if b.auth != nil {
			b.auth.Revoke(time.Now()) // end the connections of users removed from the password file
		}
	}
	if b.acl != nil {
		if err := b.acl.Reload(); err != nil {
			errs = append(errs, err)
		}
	}
	if b.tls != nil {
		if err := b.tls.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("tls: %w", err))
		}
	}
	if b.adminToken != nil {
		if err := b.adminToken.Reload(); err != nil {
			errs = append(errs, err)
		}
	}
	if b.presence != nil {
		if err := b.presence.ReloadGroups(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// onLoopback returns addr's port on 127.0.0.1.
func onLoopback(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		port = "0"
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// checkOrigin accepts a WebSocket upgrade whose Origin is one of allowed
// ("*" allows any), or that carries none (not a browser). Empty allowed:
// nil, every origin.
func checkOrigin(allowed []string) func(r *http.Request) bool {
	if len(allowed) == 0 {
		return nil
	}
	return func(r *http.Request) bool {
		origin := r.Header.Get("Origin")
		if origin == "" {
			return true
		}
		for _, a := range allowed {
			if a == "*" || strings.EqualFold(a, origin) {
				return true
			}
		}
		return false
	}
}

// observerMethods turns auth.observer_methods into the auth package's
// method names (an empty list: no method; never nil, which means all).
func observerMethods(ms []string) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		switch m {
		case "password":
			out = append(out, auth.MethodPassword)
		case "jwt":
			out = append(out, auth.MethodJWT)
		case "certificate":
			out = append(out, auth.MethodCertificate)
		}
	}
	return out
}
