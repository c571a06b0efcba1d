package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

//go:embed static
var static embed.FS

// jsFiles are served from the examples/js directory, by the name the page
// asks for.
var jsFiles = map[string]string{
	"/lib/mqtt.min.js":       filepath.Join("node_modules", "mqtt", "dist", "mqtt.min.js"),
	"/lib/presence-state.js": "presence-state.js",
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "HTTP listen address")
	jsDir := flag.String("js", "", "the examples/js directory, with MQTT.js installed by npm ci (default: examples/js or ../js, whichever exists)")
	flag.Parse()
	if err := run(*addr, *jsDir); err != nil {
		log.Fatal(err)
	}
}

func run(addr, jsDir string) error {
	dir, err := findJS(jsDir)
	if err != nil {
		return err
	}
	page, err := fs.Sub(static, "static")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(page))
	for path, file := range jsFiles {
		file := filepath.Join(dir, file)
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			http.ServeFile(w, r, file)
		})
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// The test reads this line for the address (with -addr 127.0.0.1:0).
	fmt.Printf("browser example on http://%s/ (MQTT.js from %s)\n", ln.Addr(), dir)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// findJS returns the examples/js directory: dir if given, else the first of
// examples/js and ../js that holds MQTT.js's bundle.
func findJS(dir string) (string, error) {
	candidates := []string{dir}
	if dir == "" {
		candidates = []string{filepath.Join("examples", "js"), filepath.Join("..", "js")}
	}
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, jsFiles["/lib/mqtt.min.js"])); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("MQTT.js's browser bundle not found in %v: run `npm ci` in examples/js (make deps does), or give -js", candidates)
}
