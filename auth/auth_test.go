package auth_test

import (
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/presenced/presenced/auth"
)

// Lines written by `htpasswd -B` (Apache 2.4): $2y$ hashes, which bcrypt
// takes as $2a$/$2b$.
const (
	carolLine = "carol:$2y$05$m3AXQ401NmFVjvB19sxuKuhbjVobjtqIc9GdRYkPO5vjfnjFRbv72" // correct horse
	daveLine  = "dave:$2y$04$xjaDTZwVgSpZK.y5WpFcGeAXtVmeWbCAJf4BsbjxILnAhl/nYlZpO"  // battery staple
)

func TestPasswordFile(t *testing.T) {
	t.Parallel()
	bobHash, err := bcrypt.GenerateFromPassword([]byte("bob's secret"), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	file := "# presenced users\n" +
		"\n" +
		hashLine(t, "alice", "wonderland") +
		"   # an indented comment\n" +
		"bob:" + string(bobHash) + "\r\n" + // a CRLF line
		carolLine + "\n" +
		hashLine(t, "reader", "reads all") +
		hashLine(t, "long", strings.Repeat("x", 72)) +
		daveLine // no newline at the end
	a := newAuth(t, auth.Config{
		PasswordFile: writeFile(t, t.TempDir(), "passwd", []byte(file)),
		Observers:    []string{"reader"},
	})
	tests := []struct {
		name, user, password string
		want                 auth.Identity
		wantErr              error
		reason               string
	}{
		{"generated $2a$", "alice", "wonderland", auth.Identity{User: "alice", Method: auth.MethodPassword}, nil, ""},
		{"default cost, CRLF line", "bob", "bob's secret", auth.Identity{User: "bob", Method: auth.MethodPassword}, nil, ""},
		{"htpasswd -B $2y$", "carol", "correct horse", auth.Identity{User: "carol", Method: auth.MethodPassword}, nil, ""},
		{"last line without newline", "dave", "battery staple", auth.Identity{User: "dave", Method: auth.MethodPassword}, nil, ""},
		{"observer", "reader", "reads all", auth.Identity{User: "reader", Method: auth.MethodPassword, Observer: true}, nil, ""},
		{"wrong password", "alice", "Wonderland", auth.Identity{}, auth.ErrDenied, "unknown user or wrong password"},
		{"another user's password", "carol", "wonderland", auth.Identity{}, auth.ErrDenied, "unknown user or wrong password"},
		{"empty password", "alice", "", auth.Identity{}, auth.ErrDenied, "unknown user or wrong password"},
		{"unknown user", "mallory", "wonderland", auth.Identity{}, auth.ErrDenied, "unknown user or wrong password"},
		{"a comment is no user", "# presenced users", "", auth.Identity{}, auth.ErrDenied, "unknown user or wrong password"},
		{"user with CR", "bob\r", "bob's secret", auth.Identity{}, auth.ErrDenied, "unknown user or wrong password"},
		{"bcrypt's 72 bytes and more", "long", strings.Repeat("x", 72) + "more", auth.Identity{}, auth.ErrDenied, "unknown user or wrong password"},
		{"bcrypt's 72 bytes", "long", strings.Repeat("x", 72), auth.Identity{User: "long", Method: auth.MethodPassword}, nil, ""},
		{"no username", "", "wonderland", auth.Identity{}, auth.ErrNoCredentials, ""},
		{"nothing at all", "", "", auth.Identity{}, auth.ErrNoCredentials, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := a.Authenticate(tt.user, []byte(tt.password), "client-1", nil)
			checkResult(t, got, err, tt.want, tt.wantErr, tt.reason)
			if err != nil && tt.password != "" && strings.Contains(err.Error(), tt.password) {
				t.Errorf("error %q holds the password", err)
			}
		})
	}
}

// An unknown user and a wrong password read the same, so that the error
// does not tell who exists.
func TestUnknownUserReadsLikeWrongPassword(t *testing.T) {
	t.Parallel()
	a := newAuth(t, auth.Config{PasswordFile: writeFile(t, t.TempDir(), "passwd", []byte(hashLine(t, "alice", "pw")))})
	_, wrong := a.Authenticate("alice", []byte("nope"), "c", nil)
	_, unknown := a.Authenticate("nobody", []byte("nope"), "c", nil)
	if wrong == nil || unknown == nil || wrong.Error() != unknown.Error() {
		t.Fatalf("wrong password: %v; unknown user: %v", wrong, unknown)
	}
}

func TestNewRefusesBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	alice := hashLine(t, "alice", "pw")
	tests := []struct {
		name string
		cfg  func() auth.Config
		want []string // in the error
	}{
		{"missing password file", func() auth.Config { return auth.Config{PasswordFile: dir + "/nope"} }, []string{dir + "/nope", "no such file"}},
		{"no colon", func() auth.Config {
			return auth.Config{PasswordFile: writeFile(t, dir, "p1", []byte("# c\n"+alice+"bob\n"))}
		}, []string{"p1", "line 3", "no ':'"}},
		{"empty user", func() auth.Config {
			return auth.Config{PasswordFile: writeFile(t, dir, "p2", []byte(":"+strings.SplitN(alice, ":", 2)[1]))}
		}, []string{"p2", "line 1", "empty user"}},
		{"apr1 md5 hash", func() auth.Config {
			return auth.Config{PasswordFile: writeFile(t, dir, "p3", []byte("bob:$apr1$0T1Gl3Fv$hWjk8YrV1E8Myh1lOq1nE.\n"))}
		}, []string{"p3", "line 1", "not a bcrypt hash", "htpasswd -B"}},
		{"truncated bcrypt hash", func() auth.Config {
			return auth.Config{PasswordFile: writeFile(t, dir, "p4", []byte(carolLine[:40]+"\n"))}
		}, []string{"p4", "line 1", "not a bcrypt hash"}},
		{"bad bcrypt cost", func() auth.Config {
			return auth.Config{PasswordFile: writeFile(t, dir, "p5", []byte(strings.Replace(carolLine, "$05$", "$99$", 1)))}
		}, []string{"p5", "not a bcrypt hash"}},
		{"cost too high", func() auth.Config {
			return auth.Config{PasswordFile: writeFile(t, dir, "p7", []byte(strings.Replace(carolLine, "$05$", "$16$", 1)))}
		}, []string{"p7", "line 1", "cost 16, at most 15"}},
		{"user twice", func() auth.Config {
			return auth.Config{PasswordFile: writeFile(t, dir, "p6", []byte(alice+carolLine+"\n"+alice))}
		}, []string{"p6", "line 3", `"alice" is on line 1 too`}},
		{"missing secret file", func() auth.Config { return auth.Config{JWT: auth.JWTConfig{HS256SecretFile: dir + "/nosecret"}} }, []string{dir + "/nosecret"}},
		{"short secret", func() auth.Config {
			return auth.Config{JWT: auth.JWTConfig{HS256SecretFile: writeFile(t, dir, "s1", []byte("too short\n"))}}
		}, []string{"s1", "9 bytes, at least 32"}},
		{"bad cert user source", func() auth.Config { return auth.Config{CertUserFrom: "ou"} }, []string{`"ou"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := auth.New(tt.cfg())
			if err == nil {
				t.Fatalf("New = %v, want an error", a)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestEnabled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  auth.Config
		want bool
	}{
		{"nothing", auth.Config{Observers: []string{"x"}}, false},
		{"passwords", auth.Config{PasswordFile: writeFile(t, dir, "passwd", nil)}, true},
		{"hs256", auth.Config{JWT: auth.JWTConfig{HS256SecretFile: writeFile(t, dir, "secret", secret)}}, true},
		{"public keys", auth.Config{JWT: auth.JWTConfig{PublicKeysFile: writeFile(t, dir, "keys.pem", keys().rsaPublicPEM)}}, true},
		{"certificates", auth.Config{CertUserFrom: auth.CertUserCN}, true},
	}
	for _, tt := range tests {
		a := newAuth(t, tt.cfg)
		if got := a.Enabled(); got != tt.want {
			t.Errorf("%s: Enabled() = %v, want %v", tt.name, got, tt.want)
		}
		if !tt.want {
			if _, err := a.Authenticate("alice", []byte("pw"), "c", nil); !errors.Is(err, auth.ErrNoCredentials) {
				t.Errorf("%s: Authenticate error %v, want ErrNoCredentials", tt.name, err)
			}
		}
	}
}

// The methods apply in their order: certificate, token, password.
func TestMethodOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice"}, "")
	// A password shaped like a token, which only the password file knows.
	tokenShaped := "eyJhbGciOiJIUzI1NiJ9.e30.c2VjcmV0" // {"alg":"HS256"}.{}.secret
	passwd := writeFile(t, dir, "passwd", []byte(hashLine(t, "alice", "wonderland")+hashLine(t, "erin", tokenShaped)))
	secretFile := writeFile(t, dir, "secret", secret)
	alice := selfSigned(t, "alice", []string{"alice.example"}, nil, nil)
	nameless := selfSigned(t, "", nil, nil, nil)
	all := auth.Config{PasswordFile: passwd, JWT: auth.JWTConfig{HS256SecretFile: secretFile}, CertUserFrom: auth.CertUserCN}
	noJWT := auth.Config{PasswordFile: passwd, CertUserFrom: auth.CertUserCN}
	noCert := auth.Config{PasswordFile: passwd, JWT: auth.JWTConfig{HS256SecretFile: secretFile}}
	jwtOnly := auth.Config{JWT: auth.JWTConfig{HS256SecretFile: secretFile}}
	certOnly := auth.Config{CertUserFrom: auth.CertUserCN}
	tests := []struct {
		name     string
		cfg      auth.Config
		user     string
		password string
		peer     *x509.Certificate
		want     auth.Identity
		wantErr  error
		reason   string
	}{
		{"certificate first, password ignored", all, "", "wrong", alice, auth.Identity{User: "alice", Method: auth.MethodCertificate}, nil, ""},
		{"certificate and its user", all, "alice", "", alice, auth.Identity{User: "alice", Method: auth.MethodCertificate}, nil, ""},
		{"certificate of another user", all, "bob", "", alice, auth.Identity{}, auth.ErrDenied, "username does not match the certificate"},
		{"certificate without a name", all, "alice", "wonderland", nameless, auth.Identity{}, auth.ErrDenied, "the certificate names no user"},
		{"certificate not configured", noCert, "alice", "wonderland", alice, auth.Identity{User: "alice", Method: auth.MethodPassword}, nil, ""},
		{"token before password", all, "", token, nil, auth.Identity{User: "alice", Method: auth.MethodJWT}, nil, ""},
		{"token-shaped password is a token", all, "erin", tokenShaped, nil, auth.Identity{}, auth.ErrDenied, "bad signature"},
		{"token-shaped password without JWT", noJWT, "erin", tokenShaped, nil, auth.Identity{User: "erin", Method: auth.MethodPassword}, nil, ""},
		{"password beside JWT", all, "alice", "wonderland", nil, auth.Identity{User: "alice", Method: auth.MethodPassword}, nil, ""},
		{"token without JWT is a password", noJWT, "alice", token, nil, auth.Identity{}, auth.ErrDenied, "unknown user or wrong password"},
		{"JWT only, a plain password", jwtOnly, "alice", "wonderland", nil, auth.Identity{}, auth.ErrNoCredentials, ""},
		{"certificates only, no certificate", certOnly, "alice", "wonderland", nil, auth.Identity{}, auth.ErrNoCredentials, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAuth(t, tt.cfg)
			got, err := a.Authenticate(tt.user, []byte(tt.password), "client-1", tt.peer)
			checkResult(t, got, err, tt.want, tt.wantErr, tt.reason)
		})
	}
}

func TestReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	passwd := writeFile(t, dir, "passwd", []byte(hashLine(t, "alice", "first")))
	secretFile := writeFile(t, dir, "secret", secret)
	a := newAuth(t, auth.Config{PasswordFile: passwd, JWT: auth.JWTConfig{HS256SecretFile: secretFile}})
	newSecret := []byte("the second HS256 secret, 32 bytes or more\n")
	oldToken := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice"}, "")
	newToken := sign(t, jwt.SigningMethodHS256, newSecret[:len(newSecret)-1], jwt.MapClaims{"sub": "alice"}, "")

	expect := func(step, user, password string, ok bool) {
		t.Helper()
		_, err := a.Authenticate(user, []byte(password), "c", nil)
		if ok && err != nil || !ok && !errors.Is(err, auth.ErrDenied) {
			t.Errorf("%s: %s/%.12s…: error %v, want ok=%v", step, user, password, err, ok)
		}
	}
	expect("loaded", "alice", "first", true)
	expect("loaded", "alice", oldToken, true)

	// The files change: nothing changes until Reload.
	replaceFile(t, passwd, []byte(hashLine(t, "alice", "second")+hashLine(t, "bob", "new")))
	replaceFile(t, secretFile, newSecret)
	expect("before reload", "alice", "first", true)
	expect("before reload", "bob", "new", false)
	if err := a.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	expect("reloaded", "alice", "first", false)
	expect("reloaded", "alice", "second", true)
	expect("reloaded", "bob", "new", true)
	expect("reloaded", "alice", oldToken, false)
	expect("reloaded", "alice", newToken, true)

	// A broken or missing file: Reload fails, naming it, and the material
	// stays as it was.
	broken := []struct {
		name string
		do   func()
		file string
	}{
		{"broken password file", func() { replaceFile(t, passwd, []byte("alice:plaintext\n")) }, passwd},
		{"short secret, good password file", func() {
			replaceFile(t, passwd, []byte(hashLine(t, "alice", "third")))
			replaceFile(t, secretFile, []byte("short"))
		}, secretFile},
		{"missing secret, good password file", func() {
			if err := os.Remove(secretFile); err != nil {
				t.Fatal(err)
			}
		}, secretFile},
	}
	for _, b := range broken {
		b.do()
		err := a.Reload()
		if err == nil || !strings.Contains(err.Error(), b.file) {
			t.Errorf("%s: Reload error %v, want one naming %s", b.name, err, b.file)
		}
		expect(b.name, "alice", "second", true)
		expect(b.name, "alice", "third", false)
		expect(b.name, "bob", "new", true)
		expect(b.name, "alice", newToken, true)
	}
}

// Authenticate runs on many goroutines while Reload swaps the material
// (run with -race). Every version of the files takes the same
// credentials, so every check must pass.
func TestAuthenticateDuringReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	versions := [][]byte{
		[]byte(hashLine(t, "alice", "pw") + hashLine(t, "bob", "pw")),
		[]byte("# second version\n" + hashLine(t, "bob", "pw") + hashLine(t, "alice", "pw")),
	}
	passwd := writeFile(t, dir, "passwd", versions[0])
	keysFile := writeFile(t, dir, "keys.json", keys().publicJWKSDoc)
	a := newAuth(t, auth.Config{
		PasswordFile: passwd,
		JWT:          auth.JWTConfig{HS256SecretFile: writeFile(t, dir, "secret", secret), PublicKeysFile: keysFile},
		Observers:    []string{"bob"},
	})
	hsToken := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "carol"}, "")
	edToken := sign(t, jwt.SigningMethodEdDSA, keys().ed, jwt.MapClaims{"sub": "dave"}, "d1")

	const workers, rounds = 4, 25
	done := make(chan struct{})
	var reloads, failures int
	var reloader sync.WaitGroup
	reloader.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if i%5 == 4 {
				replaceFile(t, passwd, []byte("broken\n")) // Reload must keep what it had
			} else {
				replaceFile(t, passwd, versions[i%2])
			}
			if err := a.Reload(); err != nil {
				failures++
			} else {
				reloads++
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				var user, password string
				switch (w + r) % 4 {
				case 0:
					user, password = "alice", "pw"
				case 1:
					user, password = "bob", "pw"
				case 2:
					password = hsToken
				case 3:
					password = edToken
				}
				id, err := a.Authenticate(user, []byte(password), "c", nil)
				if err != nil {
					t.Errorf("worker %d round %d: %v", w, r, err)
					return
				}
				if id.Observer != (id.User == "bob") {
					t.Errorf("worker %d round %d: %+v", w, r, id)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	reloader.Wait()
	if reloads == 0 {
		t.Errorf("no Reload succeeded (%d failed)", failures)
	}
	t.Logf("%d reloads, %d refused", reloads, failures)
}
