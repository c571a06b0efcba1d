package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/presenced/presenced/auth"
	"github.com/presenced/presenced/presence"
)

const tokenUsage = `usage: presenced token [-ttl 1h] [-groups g1,g2] [-observer] [-observer-claim NAME] SECRET_FILE USER

Prints a development token for USER: a JWT signed with HS256 by the secret
in SECRET_FILE (the file of auth.jwt.hs256_secret_file, read as the broker
reads it: less one trailing newline, at least 32 bytes). Its claims are
sub (USER), iat, exp (now + ttl), groups when -groups is given, and the
claim named by -observer-claim, true, with -observer. These are the claims
of the default auth.jwt settings (user_claim: sub, groups_claim: groups);
the observer claim counts only where auth.jwt.observer_claim names it. A
broker whose auth.jwt.max_lifetime is shorter than the ttl refuses the
token.

Flags:
  -ttl DURATION          how long the token lives, 1s to 8760h (default 1h)
  -groups g1,g2          the user's groups (comma-separated)
  -observer              make the user a service account (an observer)
  -observer-claim NAME   the observer claim's name (default presence_observer)
`

// maxTokenTTL is the longest ttl of a minted token: the longest
// auth.jwt.max_lifetime the config takes.
const maxTokenTTL = 8760 * time.Hour

// runToken is `presenced token [flags] SECRET_FILE USER`: args are the
// arguments after "token". It prints the token, and nothing else, on
// stdout. It returns the exit code: 0 done, 2 a usage error or bad input,
// 1 a secret file that cannot be used.
func runToken(args []string, stdout, stderr io.Writer) int {
	return runTokenAt(args, time.Now, stdout, stderr)
}

// runTokenAt is runToken with its clock.
func runTokenAt(args []string, now func() time.Time, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("presenced token", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ttl := fs.Duration("ttl", time.Hour, "")
	groups := fs.String("groups", "", "")
	observer := fs.Bool("observer", false, "")
	observerClaim := fs.String("observer-claim", "presence_observer", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, tokenUsage)
			return 0
		}
		fmt.Fprintf(stderr, "presenced token: %v\n%s", err, tokenUsage)
		return 2
	}
	if fs.NArg() != 2 {
		fmt.Fprint(stderr, tokenUsage)
		return 2
	}
	file, user := fs.Arg(0), fs.Arg(1)
	claims, err := tokenClaims(user, *groups, *observer, *observerClaim, *ttl, now())
	if err != nil {
		fmt.Fprintf(stderr, "presenced token: %v\n", err)
		return 2
	}
	secret, err := auth.LoadHS256Secret(file)
	if err != nil {
		fmt.Fprintf(stderr, "presenced token: %v\n", err)
		return 1
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		fmt.Fprintf(stderr, "presenced token: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, token)
	return 0
}

// tokenClaims are the claims of a token for user, checked.
func tokenClaims(user, groups string, observer bool, observerClaim string, ttl time.Duration, now time.Time) (jwt.MapClaims, error) {
	// The token does not go into a password file: presence's rule is
	// the one (checkPasswdUser adds only the file's ':').
	if err := presence.ValidUser(user); err != nil {
		return nil, err
	}
	if ttl < time.Second || ttl > maxTokenTTL {
		return nil, fmt.Errorf("-ttl %s: want 1s to %s", ttl, maxTokenTTL)
	}
	claims := jwt.MapClaims{
		"sub": user,
		"iat": now.Unix(),
		"exp": now.Add(ttl).Unix(),
	}
	if groups != "" {
		var list []string
		for _, g := range strings.Split(groups, ",") {
			g = strings.TrimSpace(g)
			if err := presence.ValidGroup(g); err != nil {
				return nil, fmt.Errorf("-groups: %w", err)
			}
			list = append(list, g)
		}
		claims["groups"] = list
	}
	if observer {
		switch observerClaim {
		case "", "sub", "groups", "iat", "exp":
			return nil, fmt.Errorf("-observer-claim %q: want a claim of its own", observerClaim)
		}
		claims[observerClaim] = true
	}
	return claims, nil
}
