package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/presenced/presenced/configs"
)

const healthUsage = `usage: presenced health [--addr HOST:PORT | --config FILE] [--path PATH] [--timeout DURATION]

Asks a running presenced whether it is ready: GET PATH (default /readyz) on
its admin port, and exits 0 on 200, 1 otherwise (not listening, 503 while
the node drains or Redis is unreachable, a timeout). For container health
checks: a scratch image has no curl.

Without --addr the admin address is read from the configuration, the way
presenced reads it (--config, else PRESENCED_CONFIG, and the PRESENCED_*
variables); an
address on every interface (:8080, 0.0.0.0:8080) is asked on 127.0.0.1.
/healthz and /readyz need no admin token.
`

// runHealth is `presenced health`: args are the arguments after "health".
// It returns the exit code: 0 ready, 1 not ready or not reachable, 2 a
// usage or configuration error.
func runHealth(args, env []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("presenced health", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "", "admin address (default: admin.addr of the configuration)")
	config := fs.String("config", "", "configuration file (default: PRESENCED_CONFIG)")
	path := fs.String("path", "/readyz", "path to GET: /readyz (ready) or /healthz (alive)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, healthUsage)
			return 0
		}
		fmt.Fprintf(stderr, "presenced health: %v\n%s", err, healthUsage)
		return 2
	}
	if fs.NArg() > 0 || !strings.HasPrefix(*path, "/") || *timeout <= 0 || (*addr != "" && *config != "") {
		fmt.Fprint(stderr, healthUsage)
		return 2
	}
	target := *addr
	if target == "" {
		var load []string
		if *config != "" {
			load = []string{"--config", *config}
		}
		cfg, err := configs.Load(load, env, nil)
		if err != nil {
			fmt.Fprintf(stderr, "presenced health: %v\n", err)
			return 2
		}
		if cfg.Admin.Addr == configs.Off {
			fmt.Fprintln(stderr, "presenced health: admin.addr is off: there is nothing to ask")
			return 2
		}
		target = cfg.Admin.Addr
	}
	url, err := healthURL(target, *path)
	if err != nil {
		fmt.Fprintf(stderr, "presenced health: %v\n", err)
		return 2
	}
	code, body, err := healthGet(url, *timeout)
	if err != nil {
		fmt.Fprintf(stderr, "presenced health: %v\n", err)
		return 1
	}
	if code != http.StatusOK {
		fmt.Fprintf(stderr, "presenced health: %s: %d %s\n", url, code, body)
		return 1
	}
	fmt.Fprintf(stdout, "presenced health: %s: %d %s\n", url, code, body)
	return 0
}

// healthURL is the URL of path on the admin listener at addr; a listener on
// every interface is asked on loopback.
func healthURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("admin address %q: %w", addr, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}

// healthGet GETs url within timeout, without any proxy, and returns the
// status code and the first line of the body.
func healthGet(url string, timeout time.Duration) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return resp.StatusCode, line, nil
}
